"""The web dashboard and the webhook callback `agentvisor serve` adds to its HTTP app.

    dashboard = Dashboard(gateway, host=host).start()
    routes = dashboard.routes()       # Starlette routes for the serve app (app.py)
    ...
    dashboard.stop()

See docs/dashboard.md.
"""

from __future__ import annotations

from .app import OPEN_PATHS, Dashboard

__all__ = ["OPEN_PATHS", "Dashboard"]
