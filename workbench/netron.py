"""Open a session's model in Netron, inside the notebook::

    from workbench import netron

    viewer = netron.serve(session)            # the ONNX model; which="pt2" for the ExportedProgram
    viewer                                    # displays Netron in an iframe
    viewer.url                                # where the browser finds it
    viewer.stop()                             # or: with netron.serve(session) as viewer: ...

The ``netron`` package's server listens on 127.0.0.1 only, on a free port. The notebook page
reaches it directly when the browser runs on the same machine. On Binder or JupyterHub the
browser is elsewhere: install ``jupyter-server-proxy`` in the server's environment and the URL
becomes ``<base url>proxy/<port>/``, which the Jupyter server forwards to 127.0.0.1 (taken
from ``JUPYTERHUB_SERVICE_PREFIX`` there; force it with ``proxy=True`` or a base URL such as
``proxy="/user/me/"``).
"""

from __future__ import annotations

import html
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporter.session import Session

__all__ = ["NetronServer", "serve"]

WHICH = ("onnx", "pt2")


@dataclass
class NetronServer:
    """A running Netron server: ``url`` for the browser (through jupyter-server-proxy when
    proxied), ``local_url`` on 127.0.0.1, ``stop()`` to shut it down."""

    url: str
    local_url: str
    address: tuple[str, int]
    which: str
    height: int = 700
    _directory: str | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def running(self) -> bool:
        return not self._stopped

    def stop(self) -> None:
        """Stop the server (and delete the temporary model file). Stopping twice is harmless."""
        if self._stopped:
            return
        import netron

        netron.stop(self.address)
        self._stopped = True
        if self._directory:
            shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self) -> NetronServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _repr_html_(self) -> str:
        if self._stopped:
            return f"<p>Netron server for the {self.which} model was stopped.</p>"
        url = html.escape(self.url, quote=True)
        return (f'<iframe src="{url}" width="100%" height="{self.height}" style="border:1px solid #ddd" '
                f'title="Netron: {self.which} model"></iframe>'
                f'<p style="font-size:smaller">Netron at <a href="{url}" target="_blank">{html.escape(self.url)}</a>; '
                f"call <code>.stop()</code> when done.</p>")


def _proxy_base(proxy: bool | str | None) -> str | None:
    if proxy is None:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or None
    if proxy is True:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
    if proxy is False:
        return None
    return str(proxy)


def serve(session: Session, which: str = "onnx", *, port: int = 0, proxy: bool | str | None = None,
          height: int = 700) -> NetronServer:
    """Serve the session's model with Netron on 127.0.0.1 and return a :class:`NetronServer`
    that displays Netron in an iframe.

    ``which``: ``onnx`` (the final ONNX model) or ``pt2`` (the captured ExportedProgram).
    ``port``: 0 picks a free one. ``proxy``: route the URL through jupyter-server-proxy
    (``None``: when running under JupyterHub/Binder, detected by ``JUPYTERHUB_SERVICE_PREFIX``).
    """
    if which not in WHICH:
        raise ValueError(f"which must be one of {', '.join(WHICH)}, not {which!r}")
    try:
        import netron
    except ImportError as exc:
        raise ImportError("Netron is not installed: pip install netron") from exc

    directory = tempfile.mkdtemp(prefix="workbench-netron-")
    try:
        path = os.path.join(directory, f"model.{which}")
        session.save(path)
        root = logging.getLogger()
        guard = logging.NullHandler()  # netron calls logging.basicConfig() on a bare root logger
        root.addHandler(guard)
        try:
            address = netron.serve(path, address=("127.0.0.1", port), browse=False)
        finally:
            root.removeHandler(guard)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    host, bound_port = address[0], int(address[1])
    local_url = f"http://{host}:{bound_port}/"
    base = _proxy_base(proxy)
    url = f"{base.rstrip('/')}/proxy/{bound_port}/" if base is not None else local_url
    return NetronServer(url, local_url, (host, bound_port), which, height, directory)
