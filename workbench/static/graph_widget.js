// The front end of workbench.graph_widget.GraphWidget (an anywidget ES module).
//
// Python lays the graphs out (Graphviz SVG, element ids "fx-op-<node>", "onnx-module-<path>",
// "fx-cluster-<path>", "onnx-more-<first path>") and sends, per element drawn, what the panel
// shows ("details"). Here: pan and zoom (a transform on one <g> around the drawing), a click
// highlights a node and its counterparts at once and tells Python ("selected"), a click on a
// module box opens it and on an open module's frame closes it ("expanded"), and the search box
// sends what was typed to Python, which selects, opens or lists the closest names.
//
// The first paint is readable: fitted when the whole drawing fits with node labels of at least
// READABLE_PX pixels, else at that scale showing the top (a minimap in the corner shows where
// the view is, and pans on click). A selection, from a click or from Python, is brought into
// view with its counterparts. The overlay legend (scale, units, case) is Python's data.

const OVERLAYS = [["none", "none"], ["error", "error"], ["time", "time"]];
const NS = "http://www.w3.org/2000/svg";
const READABLE_PX = 9;  // the smallest node label a first paint shows, in CSS pixels

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
  const state = { k: 1, x: 0, y: 0, w: 0, h: 0, userMoved: false, drag: null, moved: false, lastOpened: "", reveal: false,
                  font: 10, focus: "", revealedFor: null };
  const contentId = `wb-graph-content-${Math.random().toString(36).slice(2)}`;

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
  const legend = h("div", { class: "wb-graph-legend" });

  // -- drawing and panel ------------------------------------------------------------------------
  const viewport = h("div", { class: "wb-graph-viewport", tabindex: "0" });
  const panel = h("div", { class: "wb-graph-panel" });
  const body = h("div", { class: "wb-graph-body" }, viewport, panel);
  el.append(toolbar, crumbs, note, message, legend, body);

  // the minimap: the whole drawing small (an SVG <use> of it) and the part the view shows
  const mini = h("div", { class: "wb-graph-minimap", title: "where the view is; click to go there" });
  const miniSvg = document.createElementNS(NS, "svg");
  const miniUse = document.createElementNS(NS, "use");
  miniUse.setAttribute("href", `#${contentId}`);
  const miniRect = document.createElementNS(NS, "rect");
  miniRect.setAttribute("class", "wb-graph-minimap-view");
  miniSvg.append(miniUse, miniRect);
  mini.append(miniSvg);

  let root = null;   // the <svg> shown
  let group = null;  // the <g> that pans and zooms

  function applyTransform() {
    if (group) group.setAttribute("transform", `translate(${state.x.toFixed(1)},${state.y.toFixed(1)}) scale(${state.k.toFixed(4)})`);
    el.dataset.scale = state.k.toFixed(4);
    el.dataset.labelPx = (state.k * state.font).toFixed(2);
    updateMinimap();
  }

  function updateMinimap() {
    const cw = viewport.clientWidth, ch = viewport.clientHeight;
    const fits = state.w * state.k <= cw + 1 && state.h * state.k <= ch + 1;
    mini.style.display = !root || !cw || fits ? "none" : "";
    if (mini.style.display === "none") return;
    const mw = 110, mh = Math.min(Math.max(mw * state.h / state.w, 24), 80);
    miniSvg.setAttribute("viewBox", `0 0 ${state.w} ${state.h}`);
    miniSvg.setAttribute("width", mw); miniSvg.setAttribute("height", mh);
    miniRect.setAttribute("x", (-state.x / state.k).toFixed(1));
    miniRect.setAttribute("y", (-state.y / state.k).toFixed(1));
    miniRect.setAttribute("width", (cw / state.k).toFixed(1));
    miniRect.setAttribute("height", (ch / state.k).toFixed(1));
  }

  function measureFont() {
    // the smallest node label in drawing units: its font size times the scale of the nested
    // side <svg> it sits in (Graphviz's viewBox is not exactly its size)
    const texts = [...root.querySelectorAll("g.wb-op text, g.wb-module text, g.wb-more text, g.wb-io text")];
    const base = group.getScreenCTM();
    const sizes = texts.map((t) => {
      const size = parseFloat(t.getAttribute("font-size"));
      const m = t.getScreenCTM();
      return m && base && base.a ? size * m.a / base.a : size;
    }).filter((x) => x > 0);
    state.font = sizes.length ? Math.min(...sizes) : 10;
  }

  function readableScale() { return READABLE_PX / (state.font || 10); }

  function fitView() {
    // the whole drawing (the Fit button)
    const cw = viewport.clientWidth || 500, ch = viewport.clientHeight || 400;
    if (!state.w || !state.h) return;
    const k = Math.min(cw / state.w, ch / state.h, 2);
    state.k = k;
    state.x = (cw - state.w * k) / 2;
    state.y = Math.max((ch - state.h * k) / 2, 0);
    applyTransform();
  }

  function firstView() {
    // fitted if the labels stay readable, else readable and showing the top (pan for the rest)
    const cw = viewport.clientWidth || 500, ch = viewport.clientHeight || 400;
    if (!state.w || !state.h) return;
    const fitted = Math.min(cw / state.w, ch / state.h, 2);
    if (fitted >= readableScale()) { fitView(); return; }
    const k = readableScale();
    state.k = k;
    state.x = state.w * k <= cw ? (cw - state.w * k) / 2 : 4;
    state.y = 4;
    applyTransform();
  }

  function showBox(boxes, keep) {
    // pan (and if need be zoom out, not below half the readable scale) so that the union of
    // `boxes` (client rects) is in view; when it cannot be, `keep` (a rect) is centred instead
    if (!boxes.length) return;
    const v = viewport.getBoundingClientRect();
    const u = { left: Math.min(...boxes.map((r) => r.left)), right: Math.max(...boxes.map((r) => r.right)),
                top: Math.min(...boxes.map((r) => r.top)), bottom: Math.max(...boxes.map((r) => r.bottom)) };
    const pad = 16;
    if (u.left >= v.left && u.right <= v.right && u.top >= v.top && u.bottom <= v.bottom) return;
    const need = Math.min((v.width - 2 * pad) / (u.right - u.left || 1), (v.height - 2 * pad) / (u.bottom - u.top || 1), 1);
    let target = u;
    if (need < 1) {
      const k = state.k * need;
      if (k >= readableScale() / 2) {
        // zoom out around the union's centre
        const cx = (u.left + u.right) / 2 - v.left, cy = (u.top + u.bottom) / 2 - v.top;
        state.x = cx - (cx - state.x) * need; state.y = cy - (cy - state.y) * need; state.k = k;
        applyTransform();
        const f = need;
        target = { left: v.left + cx - (cx - (u.left - v.left)) * f, right: v.left + cx + ((u.right - v.left) - cx) * f,
                   top: v.top + cy - (cy - (u.top - v.top)) * f, bottom: v.top + cy + ((u.bottom - v.top) - cy) * f };
      } else if (keep) {
        target = keep;
      }
    }
    state.x += (v.left + v.width / 2) - (target.left + target.right) / 2;
    state.y += (v.top + v.height / 2) - (target.top + target.bottom) / 2;
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
    const content = document.createElementNS(NS, "g");
    content.setAttribute("id", contentId);
    for (const child of [...root.childNodes]) {
      if (child.nodeName.toLowerCase() !== "style") content.append(child);
    }
    group.append(content);
    root.append(group);
    viewport.append(root, mini);
    // the node labels' font size (Graphviz writes it on each <text>), for the readable scale
    measureFont();
    // a readable first view until the user pans or zooms; after that a redraw keeps their view
    if (!state.userMoved) firstView(); else applyTransform();
    paintHighlight(model.get("highlight"));
    requestAnimationFrame(() => {
      if (!state.userMoved && !state.reveal && !state.focus) initialView();
      else measureFont();
      revealHighlight();
      revealFocus();
    });
  }

  function initialView() {
    // measured once the page has laid the drawing out (a hidden tab has no size: see the
    // ResizeObserver below)
    if (!root || !viewport.clientWidth) return;
    measureFont();
    firstView();
    // a drawing that starts with something highlighted (a pass's changes): the first in view
    const first = root.querySelector(".wb-selected");
    if (first) showBox([first.getBoundingClientRect()], first.getBoundingClientRect());
  }

  function revealHighlight() {
    // after a click, a search or a selection from Python: the selected element and its
    // counterparts in view (the clicked one kept when they cannot all be)
    if (!state.reveal || !root) return;
    const shown = [...root.querySelectorAll(".wb-selected")];
    if (!shown.length || !viewport.clientWidth) return;
    state.reveal = false;
    const primary = root.querySelector(`[id="${CSS.escape(state.primary || "")}"]`) || shown[0];
    showBox(shown.map((e) => e.getBoundingClientRect()), primary.getBoundingClientRect());
  }

  function revealFocus() {
    // a module just opened or closed: its frame (or box) in view
    if (!state.focus || !root) return;
    const e = root.querySelector(`[id="${CSS.escape(state.focus)}"]`);
    state.focus = "";
    if (!e || !viewport.clientWidth) return;
    const r = e.getBoundingClientRect(), v = viewport.getBoundingClientRect();
    // its top part: an open module can be taller than the view
    const top = { left: r.left, right: r.right, top: r.top, bottom: Math.min(r.bottom, r.top + v.height * 0.8) };
    showBox([top], top);
  }

  function paintHighlight(ids) {
    if (!root) return;
    for (const e of root.querySelectorAll(".wb-selected")) e.classList.remove("wb-selected");
    for (const id of ids || []) {
      const e = root.querySelector(`[id="${CSS.escape(id)}"]`);
      if (e) e.classList.add("wb-selected");
    }
    const selected = model.get("selected");
    if (selected !== state.revealedFor) { state.revealedFor = selected; if (selected) state.reveal = true; }
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
        if (d.value !== null && d.value !== undefined)
          table.append(row(d.overlay === "time" ? "time" : "error", d.value_text || String(Number(d.value.toPrecision(4)))));
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

  function drawLegend() {
    // what the overlay's colours mean: Python's OverlayLegend (title, stops, tolerance, case)
    const l = model.get("legend") || {};
    legend.textContent = "";
    legend.style.display = l.kind ? "" : "none";
    if (!l.kind) return;
    legend.append(h("span", { class: "wb-graph-legend-title" }, l.title || ""));
    const scale = h("span", { class: "wb-graph-legend-scale" });
    for (const [colour, label] of l.stops || []) {
      scale.append(h("span", { class: "wb-graph-legend-stop" },
        h("span", { class: "wb-graph-legend-swatch", style: `background:${colour}` }), label));
    }
    legend.append(scale);
    if (l.tolerance) legend.append(h("span", { class: "wb-graph-legend-tolerance" }, `tolerance: ${l.tolerance}`));
    if (l.case) legend.append(h("span", { class: "wb-graph-legend-case" }, `case: ${l.case}`));
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
      state.primary = g.id;
      state.reveal = true;
      select(d.name, ids);
    } else if (d.kind === "module") {
      state.lastOpened = d.path;
      state.focus = `${d.side}-cluster-${d.path}`;
      setExpanded(model.get("expanded").concat(ancestors(d.path)));
    } else if (d.kind === "cluster") {
      const inside = (p) => p === d.path || p.startsWith(d.path + ".");
      state.lastOpened = d.path.includes(".") ? d.path.slice(0, d.path.lastIndexOf(".")) : "";
      state.focus = `${d.side}-module-${d.path}`;
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
  mini.addEventListener("pointerdown", (event) => {
    // centre the view on the point clicked in the minimap
    event.stopPropagation();
    const r = miniSvg.getBoundingClientRect();
    const px = (event.clientX - r.left) / r.width * state.w, py = (event.clientY - r.top) / r.height * state.h;
    state.x = viewport.clientWidth / 2 - px * state.k;
    state.y = viewport.clientHeight / 2 - py * state.k;
    state.userMoved = true;
    applyTransform();
  });
  mini.addEventListener("click", (event) => event.stopPropagation());
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

  // a widget drawn while hidden (a tab not shown yet) or resized: the first view again, until
  // the user pans or zooms
  let lastSize = "";
  const resized = new ResizeObserver(() => {
    const size = `${viewport.clientWidth}x${viewport.clientHeight}`;
    if (size === lastSize || !viewport.clientWidth) return;
    lastSize = size;
    if (!state.userMoved) initialView(); else updateMinimap();
  });
  resized.observe(viewport);

  // -- Python → page --------------------------------------------------------------------------------
  const redraw = () => { drawSvg(); drawPanel(); drawCrumbs(); };
  const onHighlight = () => { paintHighlight(model.get("highlight")); drawPanel(); drawCrumbs(); };
  model.on("change:svg", redraw);
  model.on("change:highlight", onHighlight);
  model.on("change:selected", () => { drawCrumbs(); });
  model.on("change:expanded", drawCrumbs);
  model.on("change:message", drawMessage);
  model.on("change:legend", drawLegend);
  model.on("change:overlay", drawToolbar);
  model.on("change:status", drawToolbar);
  model.on("change:computing", drawToolbar);
  model.on("change:note", drawToolbar);
  model.on("change:height", drawToolbar);
  model.on("change:show_overlays", drawToolbar);
  drawToolbar(); drawMessage(); drawLegend(); redraw();

  return () => {
    resized.disconnect();
    for (const name of ["svg", "highlight", "selected", "expanded", "message", "legend", "overlay", "status", "computing", "note", "height", "show_overlays"]) model.off(`change:${name}`);
  };
}

export default { render };
