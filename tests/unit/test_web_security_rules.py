"""The rules behind the dashboard's HTTP defences, alone (docs/dashboard.rst, "Safety rules"):
the login throttle and the sessions with a plain float for a clock, the hosts a bind
answers to, ``safe_next``, and the command's ``--allowed-host`` / ``--allowed-origin``."""

from __future__ import annotations

import argparse
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trioqueue.cli import _dashboard
from trioqueue.cli._commands import build_parser
from trioqueue.web.auth import Guard, safe_next
from trioqueue.web.hosts import (
    LOOPBACK_NAMES,
    bind_hosts,
    normal_host,
    normal_origin,
    parse_host,
)
from trioqueue.web.sessions import Sessions
from trioqueue.web.throttle import LoginThrottle, client_key

# -- the login throttle ---------------------------------------------------------------------


def test_a_client_gets_its_burst_then_one_try_per_refill() -> None:
    throttle = LoginThrottle(burst=3, refill=0.5)  # then one every 2 s
    for now in (0.0, 0.1, 0.2):
        assert throttle.retry_after("a", now) is None
        throttle.failed("a", now)
    assert throttle.retry_after("a", 0.2) == 2
    assert throttle.retry_after("a", 1.0) == 1  # 1.6 s left, rounded up
    assert throttle.retry_after("a", 2.2) is None
    throttle.failed("a", 2.2)
    assert throttle.retry_after("a", 2.2) == 2
    assert throttle.retry_after("b", 2.2) is None  # per client


def test_a_drained_bucket_forgets_old_mistakes() -> None:
    throttle = LoginThrottle(burst=3, refill=0.5)
    throttle.failed("a", 0.0)
    throttle.failed("a", 0.0)
    throttle.failed("a", 100.0)  # the first two drained long ago
    throttle.failed("a", 100.0)
    assert throttle.retry_after("a", 100.0) is None


@given(st.lists(st.floats(min_value=0, max_value=0.5), min_size=1, max_size=200))
def test_guessing_as_fast_as_allowed_never_beats_the_rate(gaps: list[float]) -> None:
    """However a client spaces its tries, it gets at most ``burst + refill * t`` in ``t`` s."""
    throttle = LoginThrottle(burst=10, refill=0.1)
    now, tried = 0.0, 0
    for gap in gaps:
        now += gap
        if throttle.retry_after("a", now) is None:
            throttle.failed("a", now)
            tried += 1
    assert tried <= 10 + 0.1 * now + 1e-9


def test_the_client_table_is_bounded() -> None:
    throttle = LoginThrottle(burst=2, refill=1.0, max_clients=3)
    for n in range(3):
        throttle.failed(f"c{n}", 0.0)
        throttle.failed(f"c{n}", 0.0)
    throttle.failed("c3", 0.5)  # full: the oldest goes (none has drained yet)
    assert len(throttle) == 3
    assert throttle.retry_after("c0", 0.5) is None
    assert throttle.retry_after("c1", 0.5) == 1
    throttle.failed("c4", 10.0)  # the drained ones go first
    assert len(throttle) == 1


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8::1", "2001:db8::/64"),
        ("2001:db8::ffff:1", "2001:db8::/64"),
        (None, "unknown"),
    ],
)
def test_clients_are_addresses_and_ipv6_counts_by_its_64(host: str | None, key: str) -> None:
    assert client_key(host) == key


# -- sessions ---------------------------------------------------------------------------------


def test_a_session_lives_until_logout_or_its_lifetime() -> None:
    sessions = Sessions(lifetime=100.0)
    cookie = sessions.start(0.0)
    assert sessions.valid(cookie, 99.0)
    sessions.end(cookie)
    assert not sessions.valid(cookie, 99.0)
    old = sessions.start(0.0)
    assert not sessions.valid(old, 100.0)
    assert len(sessions) == 0


def test_only_cookies_this_app_signed_are_valid() -> None:
    sessions, other = Sessions(), Sessions()
    cookie = sessions.start(0.0)
    session_id, _, signature = cookie.partition(".")
    assert not other.valid(cookie, 0.0)  # another dashboard on this host
    assert not sessions.valid(session_id, 0.0)
    assert not sessions.valid(f"{session_id}.{'0' * len(signature)}", 0.0)
    assert not sessions.valid("", 0.0) and not sessions.valid(None, 0.0)
    sessions.end("garbage")  # a no-op
    assert sessions.valid(cookie, 0.0)


def test_the_session_table_is_bounded() -> None:
    sessions = Sessions(max_sessions=2)
    first, second, third = (sessions.start(float(n)) for n in range(3))
    assert len(sessions) == 2
    assert not sessions.valid(first, 3.0)
    assert sessions.valid(second, 3.0) and sessions.valid(third, 3.0)


# -- hosts and origins -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bind", "hosts"),
    [
        ("127.0.0.1", ("127.0.0.1", *LOOPBACK_NAMES)),
        ("::1", ("[::1]", *LOOPBACK_NAMES)),
        ("localhost", LOOPBACK_NAMES),
        ("192.0.2.1", ("192.0.2.1",)),
        ("Dash.Example", ("dash.example",)),
    ],
)
def test_a_bind_answers_to_its_address_and_loopback_to_its_names(
    bind: str, hosts: tuple[str, ...]
) -> None:
    assert set(bind_hosts(bind)) == set(hosts)
    assert set(bind_hosts(bind, ["proxy.example"])) == {*hosts, "proxy.example"}


def test_a_wildcard_bind_answers_to_loopback_and_this_machines_names() -> None:
    hosts = bind_hosts("0.0.0.0")
    assert set(LOOPBACK_NAMES) <= set(hosts)
    assert socket.gethostname().lower() in hosts
    assert "0.0.0.0" not in hosts


@pytest.mark.parametrize(
    ("header", "parsed"),
    [
        ("Dash.Example:8080", ("dash.example", "8080")),
        ("[::1]:8080", ("[::1]", "8080")),
        ("[0:0::1]", ("[::1]", None)),
        ("127.0.0.1", ("127.0.0.1", None)),
        ("[zz::1]", None),
        ("a b", None),
        ("a:b", None),
        ("", None),
        (None, None),
    ],
)
def test_host_headers_are_parsed_as_rfc_9110_writes_them(
    header: str | None, parsed: tuple[str, str | None] | None
) -> None:
    assert parse_host(header) == parsed


@pytest.mark.parametrize(
    ("text", "host"), [("Dash.Example", "dash.example"), ("::1", "[::1]"), ("[0::1]", "[::1]")]
)
def test_host_names_are_written_as_host_headers_give_them(text: str, host: str) -> None:
    assert normal_host(text) == host


@pytest.mark.parametrize("text", ["", "a b", "dash.example:80", "http://dash.example", "a/b"])
def test_a_bad_host_name_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a host name"):
        normal_host(text)


@pytest.mark.parametrize(
    ("text", "origin"),
    [("https://Dash.Example/", "https://dash.example"), ("http://h:8080", "http://h:8080")],
)
def test_origins_are_written_as_browsers_send_them(text: str, origin: str) -> None:
    assert normal_origin(text) == origin


@pytest.mark.parametrize(
    "text", ["dash.example", "ftp://h", "https://h/x", "https://h?q", "https://u@h", "null"]
)
def test_a_bad_origin_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not an origin"):
        normal_origin(text)


# -- safe_next ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["/", "/jobs?status=ready&q=a%20b", "/jobs/5", "/a:b"])
def test_plain_paths_are_kept(value: str) -> None:
    assert safe_next(value) == value


@given(st.text())
def test_safe_next_answers_only_a_plain_same_site_path(value: str) -> None:
    target = safe_next(value)
    assert target == "/" or target == value
    assert target.startswith("/") and not target.startswith("//")
    assert all("!" <= c <= "~" and c != "\\" for c in target)


# -- the command's options ----------------------------------------------------------------------


def test_allowed_hosts_and_origins_come_from_options_and_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(_dashboard.HOSTS_ENV, "b.example, C.example")
    monkeypatch.setenv(_dashboard.ORIGINS_ENV, "https://b.example")
    args = build_parser().parse_args(
        ["dashboard", "--allowed-host", "a.example", "--allowed-origin", "https://a.example/"]
    )
    access = _dashboard.Access.from_args(args)
    assert access.hosts == ("a.example", "b.example", "c.example")
    assert access.origins == ("https://a.example", "https://b.example")


@pytest.mark.parametrize(
    ("option", "value", "match"),
    [("allowed_host", "http://a.example", "not a host name"), ("allowed_origin", "a", "origin")],
)
def test_a_bad_allowed_host_or_origin_is_an_error_before_connecting(
    monkeypatch: pytest.MonkeyPatch, option: str, value: str, match: str
) -> None:
    monkeypatch.delenv(_dashboard.TOKEN_ENV, raising=False)
    args = argparse.Namespace(**{"allowed_host": [], "allowed_origin": [], option: [value]})
    with pytest.raises(ValueError, match=match):
        _dashboard.check("127.0.0.1", args)


def test_a_guard_keeps_the_sessions_it_is_given_even_while_empty() -> None:
    """An empty Sessions is falsy (it has a length); the guard must still use it, or two
    apps meant to share their logins (a multi-database dashboard) would not."""
    shared = Sessions()
    assert len(shared) == 0
    guard = Guard(token="t", read_only=False, allowed_origins=None, sessions=shared)
    assert guard.sessions is shared
    assert Guard(token="t", read_only=False, allowed_origins=None).sessions is not shared
