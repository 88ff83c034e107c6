// The front end of workbench.graph_widget.GraphWidget (an anywidget ES module).
//
// Python lays the graphs out (Graphviz SVG, element ids "fx-op-<node>", "onnx-module-<path>",
// "fx-cluster-<path>", "onnx-more-<first path>") and sends, per element drawn, what the panel
// shows ("details"). Here: pan and zoom (a transform on one <g> around the drawing), a click
// highlights a node and its counterparts at once and tells Python ("selected"), a click on a
// module box opens it and on an open module's frame closes it ("expanded"), and the search box
// sends what was typed to Python, which selects, opens or lists the closest names.

const OVERLAYS = [["none", "none"], ["error", "error"], ["time", "time"]];
const NS = "http://www.w3.org/2000/svg";

function h(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function ancestors(path) {
  if (!path) return [];
  const parts = path.split(".");
  return parts.map((_, i) => parts.slice(0, i + 1).join("."));
}

function render({ model, el }) {
  el.classList.add("wb-graph-widget");
  const state = { k: 1, x: 0, y: 0, w: 0, h: 0, userMoved: false, drag: null, moved: false, lastOpened: "", reveal: false };

  // -- toolbar --------------------------------------------------------------------------------
  const listId = `wb-graph-names-${Math.random().toString(36).slice(2)}`;
  const datalist = h("datalist", { id: listId });
  const search = h("input", { type: "search", class: "wb-graph-search", placeholder: "node, op or module…",
                              list: listId, "aria-label": "search the graphs" });
  const fit = h("button", { class: "wb-graph-fit", title: "fit the drawing to the view" }, "Fit");
  const zoomIn = h("button", { class: "wb-graph-zoom-in", title: "zoom in" }, "+");
  const zoomOut = h("button", { class: "wb-graph-zoom-out", title: "zoom out" }, "−");
  const overlayButtons = OVERLAYS.map(([value, label]) =>
    h("button", { class: `wb-graph-overlay wb-graph-overlay-${value}`, "data-overlay": value,
                  title: value === "none" ? "no overlay" : value === "error" ? "FX vs ONNX error per node" : "onnxruntime time per node" }, label));
  const overlayGroup = h("span", { class: "wb-graph-overlays", title: "paint the nodes by" }, "overlay ", ...overlayButtons);
  const status = h("span", { class: "wb-graph-status" });
  // An overlay is computed on the kernel's export worker: the drawing stays, this stops it.
  const cancel = h("button", { class: "wb-graph-cancel", title: "stop computing the overlay (the previous one stays)" }, "Cancel");
  const toolbar = h("div", { class: "wb-graph-toolbar" }, search, datalist, fit, zoomOut, zoomIn, overlayGroup, status, cancel);
  const crumbs = h("div", { class: "wb-graph-crumbs" });
  const note = h("div", { class: "wb-graph-note" });
  const message = h("div", { class: "wb-graph-message" });

  // -- drawing and panel ------------------------------------------------------------------------
  const viewport = h("div", { class: "wb-graph-viewport", tabindex: "0" });
  const panel = h("div", { class: "wb-graph-panel" });
  const body = h("div", { class: "wb-graph-body" }, viewport, panel);
  el.append(toolbar, crumbs, note, message, body);

  let root = null;   // the <svg> shown
  let group = null;  // the <g> that pans and zooms

  function applyTransform() {
    if (group) group.setAttribute("transform", `translate(${state.x.toFixed(1)},${state.y.toFixed(1)}) scale(${state.k.toFixed(4)})`);
  }

  function fitView() {
    const cw = viewport.clientWidth || 500, ch = viewport.clientHeight || 400;
    if (!state.w || !state.h) return;
    const k = Math.min(cw / state.w, ch / state.h, 2);
    state.k = k;
    state.x = (cw - state.w * k) / 2;
    state.y = Math.max((ch - state.h * k) / 2, 0);
    applyTransform();
  }

  function zoomAt(factor, px, py) {
    state.userMoved = true;
    const k = Math.min(Math.max(state.k * factor, 0.02), 8);
    const f = k / state.k;
    state.x = px - (px - state.x) * f;
    state.y = py - (py - state.y) * f;
    state.k = k;
    applyTransform();
  }

  function drawSvg() {
    const text = model.get("svg");
    viewport.textContent = "";
    root = null; group = null;
    if (!text) {
      viewport.append(h("div", { class: "wb-graph-empty" }, model.get("note") ? "" : "Nothing drawn yet."));
      return;
    }
    const holder = document.createElement("div");
    holder.innerHTML = text;
    root = holder.querySelector("svg");
    const box = (root.getAttribute("viewBox") || "0 0 0 0").split(/\s+/).map(Number);
    state.w = box[2]; state.h = box[3];
    root.removeAttribute("viewBox");
    root.setAttribute("width", "100%");
    root.setAttribute("height", "100%");
    group = document.createElementNS(NS, "g");
    group.setAttribute("class", "wb-graph-pan");
    for (const child of [...root.childNodes]) {
      if (child.nodeName.toLowerCase() !== "style") group.append(child);
    }
    root.append(group);
    viewport.append(root);
    // fitted until the user pans or zooms; after that a redraw keeps their view
    if (!state.userMoved) requestAnimationFrame(() => { if (!state.userMoved) fitView(); });
    applyTransform();
    paintHighlight(model.get("highlight"));
  }

  function revealHighlight() {
    // after a search or a clicked name: bring the first highlighted element into view
    if (!state.reveal || !root) return;
    const first = root.querySelector(".wb-selected");
    if (!first) return;
    state.reveal = false;
    const v = viewport.getBoundingClientRect(), r = first.getBoundingClientRect();
    if (r.left >= v.left && r.right <= v.right && r.top >= v.top && r.bottom <= v.bottom) return;
    state.x += (v.left + v.width / 2) - (r.left + r.width / 2);
    state.y += (v.top + v.height / 2) - (r.top + r.height / 2);
    applyTransform();
  }

  function paintHighlight(ids) {
    if (!root) return;
    for (const e of root.querySelectorAll(".wb-selected")) e.classList.remove("wb-selected");
    for (const id of ids || []) {
      const e = root.querySelector(`[id="${CSS.escape(id)}"]`);
      if (e) e.classList.add("wb-selected");
    }
    revealHighlight();
  }

  function focusPath() {
    const details = model.get("details");
    const selected = model.get("selected");
    for (const d of Object.values(details)) {
      if (d.kind === "op" && d.name === selected) return d.module || "";
    }
    if (selected && (details[`fx-cluster-${selected}`] || details[`onnx-cluster-${selected}`])) return selected;
    return state.lastOpened;
  }

  function drawCrumbs() {
    crumbs.textContent = "";
    const expanded = new Set(model.get("expanded"));
    const path = focusPath();
    const items = [h("a", { href: "#", class: "wb-crumb", "data-path": "", title: "close every module" }, "model")];
    for (const p of ancestors(path)) {
      items.push(h("span", { class: "wb-crumb-sep" }, " › "));
      const open = expanded.has(p);
      items.push(h("a", { href: "#", class: `wb-crumb${open ? " wb-crumb-open" : ""}`, "data-path": p,
                          title: open ? `keep ${p} open, close what is inside it` : `open ${p}` }, p.split(".").pop()));
    }
    crumbs.append(...items);
  }

  function closeBelow(path) {
    // keep `path` and its ancestors open, close everything else
    const keep = new Set(ancestors(path));
    setExpanded(model.get("expanded").filter((p) => keep.has(p)).concat(path && !keep.has(path) ? [path] : []));
  }

  function setExpanded(list) {
    model.set("expanded", [...new Set(list)]);
    model.save_changes();
  }

  function row(label, value) {
    return h("tr", {}, h("th", {}, label), h("td", {}, value));
  }

  function nameLink(name, title) {
    return h("a", { href: "#", class: "wb-graph-name", "data-select": name, title: title || `select ${name}` }, name);
  }

  function valueList(items) {
    const ul = h("ul", { class: "wb-graph-values" });
    for (const [name, type] of items) ul.append(h("li", {}, h("code", {}, name), type ? h("span", { class: "wb-type" }, " " + type) : null));
    return ul;
  }

  function drawPanel() {
    panel.textContent = "";
    const details = model.get("details");
    const selected = model.get("selected");
    const ids = model.get("highlight") || [];
    const shown = ids.map((id) => [id, details[id]]).filter(([, d]) => d);
    if (!selected || !shown.length) {
      panel.append(h("p", { class: "wb-graph-hint" },
        "Click a node for its details, a grey module box to open it, an open module's frame to close it. " +
        "Drag to pan, wheel to zoom."));
      return;
    }
    // the selected node's own entry first, then its counterparts
    shown.sort(([, a], [, b]) => (b.name === selected) - (a.name === selected));
    for (const [id, d] of shown) {
      const table = h("table", {});
      if (d.kind === "op") {
        table.append(row("op", h("code", {}, d.op)));
        if (d.attributes.length) table.append(row("attributes", valueList(d.attributes.map(([k, v]) => [k, "= " + v]))));
        table.append(row("inputs", valueList(d.inputs)));
        table.append(row("outputs", valueList(d.outputs)));
        if (d.module !== null && d.module !== undefined)
          table.append(row("module", h("span", {}, d.module || "(top level)", d.class ? h("span", { class: "wb-type" }, ` ${d.class}`) : null)));
        if (d.source) table.append(row("source", h("code", { class: "wb-source" }, d.source)));
        if (d.value !== null && d.value !== undefined) table.append(row(d.overlay === "time" ? "time µs" : "error", String(Number(d.value.toPrecision(4)))));
        if (d.mapped.length) {
          const links = h("span", { class: "wb-graph-mapped" });
          d.mapped.forEach(([side, name], i) => { if (i) links.append(", "); links.append(nameLink(name, `select ${side.toUpperCase()} node ${name}`)); });
          table.append(row(d.mapped_label || (d.side === "fx" ? "ONNX nodes" : "FX nodes"), links));
        }
        if (d.change) table.append(row("this pass", d.change));
        if (d.origin && d.origin !== "fx") table.append(row("origin", d.origin));
        panel.append(h("div", { class: `wb-graph-card wb-graph-card-${d.side}`, "data-id": id },
          h("div", { class: "wb-graph-card-title" }, `${d.side.toUpperCase()} `, h("b", {}, d.name)), table));
      } else {
        const title = d.kind === "more" ? `${d.modules.length} modules` : d.path;
        if (d.class) table.append(row("class", d.class));
        if (d.nodes !== undefined) table.append(row("nodes", String(d.nodes)));
        const kids = d.kind === "more" ? d.modules : d.children || [];
        if (kids.length) {
          const links = h("span", {});
          kids.slice(0, 40).forEach((p, i) => { if (i) links.append(", "); links.append(nameLink(p, `open ${p}`)); });
          table.append(row(d.kind === "more" ? "modules" : "submodules", links));
        }
        panel.append(h("div", { class: `wb-graph-card wb-graph-card-${d.side}`, "data-id": id },
          h("div", { class: "wb-graph-card-title" }, `${d.side.toUpperCase()} module `, h("b", {}, title)), table));
      }
    }
  }

  function drawMessage() {
    const m = model.get("message") || {};
    message.textContent = "";
    message.className = `wb-graph-message${m.kind ? " wb-graph-message-" + m.kind : ""}`;
    if (!m.text && !(m.names || []).length) return;
    message.append(m.text || "");
    (m.names || []).forEach((name, i) => { message.append(i ? ", " : " "); message.append(nameLink(name)); });
  }

  function drawToolbar() {
    const overlay = model.get("overlay");
    overlayGroup.style.display = model.get("show_overlays") === false ? "none" : "";  // no overlay on a pass's graphs
    for (const b of overlayButtons) b.classList.toggle("wb-active", b.dataset.overlay === overlay);
    const computing = model.get("computing") || "";
    status.textContent = model.get("status") || (computing ? "computing…" : "");
    status.classList.toggle("wb-graph-computing", Boolean(computing));
    cancel.style.display = computing ? "" : "none";
    for (const b of overlayButtons) b.classList.toggle("wb-pending", Boolean(computing) && b.dataset.overlay === computing);
    note.textContent = model.get("note") || "";
    note.style.display = model.get("note") ? "" : "none";
    viewport.style.height = model.get("height") || "480px";
  }

  function fillNames() {
    // the 60 names that best match what is typed: a datalist of 10,000 options is slow
    const typed = search.value.toLowerCase();
    const names = model.get("names");
    const starts = [], contains = [];
    for (const n of names) {
      const l = n.toLowerCase();
      if (!typed || l.startsWith(typed)) starts.push(n);
      else if (l.includes(typed)) contains.push(n);
      if (starts.length >= 60) break;
    }
    datalist.textContent = "";
    for (const n of starts.concat(contains).slice(0, 60)) datalist.append(h("option", { value: n }));
  }

  // -- events ---------------------------------------------------------------------------------------
  function select(name, optimistic) {
    if (optimistic) paintHighlight(optimistic);
    model.set("selected", name);
    model.save_changes();
  }

  function elementOf(target) {
    const g = target.closest && target.closest("g.wb-op, g.wb-module, g.wb-more, g.wb-cluster");
    return g && root && root.contains(g) ? g : null;
  }

  viewport.addEventListener("click", (event) => {
    if (state.moved) { state.moved = false; return; }
    const g = elementOf(event.target);
    if (!g) return;
    const details = model.get("details");
    const d = details[g.id];
    if (!d) return;
    const started = performance.now();
    if (d.kind === "op") {
      const ids = [g.id].concat(d.mapped.map(([, , id]) => id).filter(Boolean));
      select(d.name, ids);
    } else if (d.kind === "module") {
      state.lastOpened = d.path;
      setExpanded(model.get("expanded").concat(ancestors(d.path)));
    } else if (d.kind === "cluster") {
      const inside = (p) => p === d.path || p.startsWith(d.path + ".");
      state.lastOpened = d.path.includes(".") ? d.path.slice(0, d.path.lastIndexOf(".")) : "";
      setExpanded(model.get("expanded").filter((p) => !inside(p)));
    } else if (d.kind === "more") {
      paintHighlight([g.id]);
      message.textContent = "";
      message.append(`${d.modules.length} modules folded here; open one: `);
      d.modules.slice(0, 40).forEach((p, i) => { if (i) message.append(", "); message.append(nameLink(p, `open ${p}`)); });
    }
    el.dataset.lastClickMs = (performance.now() - started).toFixed(2);
  });

  el.addEventListener("click", (event) => {
    const a = event.target.closest && event.target.closest("a[data-select], a.wb-crumb");
    if (!a || !el.contains(a)) return;
    event.preventDefault();
    if (a.classList.contains("wb-crumb")) {
      state.lastOpened = a.dataset.path;
      closeBelow(a.dataset.path);
      return;
    }
    state.reveal = true;
    model.send({ type: "search", text: a.dataset.select });
  });

  viewport.addEventListener("wheel", (event) => {
    event.preventDefault();
    const r = viewport.getBoundingClientRect();
    zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - r.left, event.clientY - r.top);
  }, { passive: false });

  viewport.addEventListener("pointerdown", (event) => {
    if (event.button !== 0) return;
    state.drag = { x: event.clientX, y: event.clientY, ox: state.x, oy: state.y };
    state.moved = false;
  });
  viewport.addEventListener("pointermove", (event) => {
    const d = state.drag;
    if (!d) return;
    const dx = event.clientX - d.x, dy = event.clientY - d.y;
    if (!state.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!state.moved) { state.moved = true; viewport.setPointerCapture(event.pointerId); viewport.classList.add("wb-panning"); }
    state.x = d.ox + dx; state.y = d.oy + dy;
    state.userMoved = true;
    applyTransform();
  });
  const endDrag = () => { state.drag = null; viewport.classList.remove("wb-panning"); };
  viewport.addEventListener("pointerup", endDrag);
  viewport.addEventListener("pointercancel", endDrag);

  fit.addEventListener("click", () => { state.userMoved = false; fitView(); });
  zoomIn.addEventListener("click", () => zoomAt(1.25, viewport.clientWidth / 2, viewport.clientHeight / 2));
  zoomOut.addEventListener("click", () => zoomAt(0.8, viewport.clientWidth / 2, viewport.clientHeight / 2));
  for (const b of overlayButtons) b.addEventListener("click", () => { model.set("overlay", b.dataset.overlay); model.save_changes(); });
  cancel.addEventListener("click", () => model.send({ type: "cancel" }));
  search.addEventListener("input", fillNames);
  search.addEventListener("focus", fillNames);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      const text = search.value.trim();
      if (text) { state.reveal = true; model.send({ type: "search", text }); }
    }
  });

  // -- Python → page --------------------------------------------------------------------------------
  const redraw = () => { drawSvg(); drawPanel(); drawCrumbs(); };
  const onHighlight = () => { paintHighlight(model.get("highlight")); drawPanel(); drawCrumbs(); };
  model.on("change:svg", redraw);
  model.on("change:highlight", onHighlight);
  model.on("change:selected", () => { drawCrumbs(); });
  model.on("change:expanded", drawCrumbs);
  model.on("change:message", drawMessage);
  model.on("change:overlay", drawToolbar);
  model.on("change:status", drawToolbar);
  model.on("change:computing", drawToolbar);
  model.on("change:note", drawToolbar);
  model.on("change:height", drawToolbar);
  model.on("change:show_overlays", drawToolbar);
  drawToolbar(); drawMessage(); redraw();

  return () => {
    for (const name of ["svg", "highlight", "selected", "expanded", "message", "overlay", "status", "computing", "note", "height", "show_overlays"]) model.off(`change:${name}`);
  };
}

export default { render };
