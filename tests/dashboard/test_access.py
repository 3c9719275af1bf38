"""Who may use the dashboard: no login for a browser on this machine when the gateway is on
loopback; a token login (Secure, HttpOnly, SameSite=Strict cookie) everywhere else; CSRF
token and Origin on every POST; no DNS rebinding; the agents' bearer token opens nothing."""

from __future__ import annotations

import httpx

from tests.dashboard.conftest import BASE_CONFIG, screenshot, serve

DASH_TOKEN = "dashboard-token-for-tests-42"


def with_login(dash_env, mode: str = "always") -> None:
    dash_env["config"].write_text(
        BASE_CONFIG + f"dashboard:\n  login: {mode}\n  token: {DASH_TOKEN}\n"
    )


def test_token_login_sets_a_strict_cookie_and_posts_need_csrf(dash_env, page):
    with_login(dash_env)
    with serve(dash_env) as gw:
        assert gw.api("/me").status_code == 401
        page.goto(gw.dashboard)
        page.wait_for_url("**/dashboard/login")
        page.fill("input[name=name]", "alice")
        page.fill("input[name=token]", "wrong-token")
        page.click("button[type=submit]")
        page.get_by_text("That token is not right.").wait_for()
        screenshot(page, "login")

        page.fill("input[name=name]", "alice")
        page.fill("input[name=token]", DASH_TOKEN)
        page.click("button[type=submit]")
        page.wait_for_url("**/dashboard/")
        page.locator("#me", has_text="alice").wait_for()
        [cookie] = page.context.cookies()
        assert cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Strict"
        assert cookie["path"] == "/dashboard"
        assert cookie["name"] not in page.evaluate("document.cookie")

        # The browser's own POSTs work (control): a grant made in the page.
        page.click("nav a[data-view=grants]")
        page.fill("#grant-form input[name=pattern]", "make test")
        page.click("#grant-form button[type=submit]")
        page.locator("#grants tr", has_text="web:alice").wait_for()

        jar = {cookie["name"]: cookie["value"]}
        csrf = httpx.get(gw.base + "/dashboard/api/me", cookies=jar).json()["csrf"]
        url = gw.base + "/dashboard/api/grants"
        grant = {"kind": "exec", "pattern": "ls", "duration": "5m"}
        assert (
            httpx.post(url, json=grant, cookies=jar, headers={"origin": gw.base}).status_code == 403
        )
        assert (
            httpx.post(
                url,
                json=grant,
                cookies=jar,
                headers={"x-csrf-token": csrf, "origin": "http://evil.example"},
            ).status_code
            == 403
        )
        assert (
            httpx.post(
                url, json=grant, cookies=jar, headers={"x-csrf-token": "guess", "origin": gw.base}
            ).status_code
            == 403
        )
        assert (
            httpx.post(
                url, json=grant, cookies=jar, headers={"x-csrf-token": csrf, "origin": gw.base}
            ).status_code
            == 200
        )  # control
        # A login form posted from another site is refused.
        forged = httpx.post(
            gw.base + "/dashboard/login",
            headers={"origin": "http://evil.example"},
            data={"name": "x", "token": DASH_TOKEN},
        )
        assert forged.status_code == 403 and "set-cookie" not in forged.headers

        page.click("#logout")
        page.wait_for_url("**/dashboard/login")
        assert httpx.get(gw.base + "/dashboard/api/me", cookies=jar).status_code == 401


def test_loopback_without_login_refuses_other_hosts_and_proxied_requests(dash_env):
    with serve(dash_env) as gw:
        assert gw.api("/me").status_code == 200  # control: a browser on this machine
        # DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends its own Host.
        rebound = gw.api("/me", headers={"host": f"evil.example:{gw.base.rsplit(':', 1)[1]}"})
        assert rebound.status_code == 403
        # Through a reverse proxy the client is someone else: log in first.
        assert gw.api("/me", headers={"x-forwarded-for": "203.0.113.9"}).status_code == 401
        assert gw.api("/me", headers={"forwarded": "for=203.0.113.9"}).status_code == 401
        # Without a token no one can log in at all.
        r = httpx.get(gw.base + "/dashboard/login", headers={"x-forwarded-for": "203.0.113.9"})
        assert "dashboard.token is not set" in r.text
        # The page itself cannot be framed (clickjacking the approve button).
        page = httpx.get(gw.dashboard)
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_off_loopback_needs_the_dashboard_token_not_the_agents(dash_env):
    with_login(dash_env, "auto")
    with serve(dash_env, "--token", "agents-bearer-token", host="0.0.0.0") as gw:
        # A client on this machine still has to log in: the gateway listens beyond it.
        assert gw.api("/me").status_code == 401
        first = httpx.get(gw.dashboard)
        assert first.status_code == 303 and first.headers["location"] == "/dashboard/login"
        # The agents' bearer token opens MCP, never the dashboard.
        bearer = {"authorization": "Bearer agents-bearer-token"}
        assert gw.api("/me", headers=bearer).status_code == 401
        assert httpx.post(gw.mcp, json={}).status_code == 401  # MCP still needs it
        # The login page warns that a Secure cookie needs HTTPS off loopback.
        login = httpx.get(gw.base + "/dashboard/login", headers={"host": "gateway.example:8765"})
        assert "not encrypted" in login.text
        # The dashboard token logs in.
        r = httpx.post(
            gw.base + "/dashboard/login",
            headers={"origin": gw.base},
            data={"name": "bob", "token": DASH_TOKEN},
        )
        assert r.status_code == 303 and "HttpOnly" in r.headers["set-cookie"]
        jar = {"agentvisor_dashboard": r.cookies["agentvisor_dashboard"]}
        assert httpx.get(gw.base + "/dashboard/api/me", cookies=jar).json()["name"] == "bob"
