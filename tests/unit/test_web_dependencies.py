"""A job's dependencies on the dashboard's job page (docs/protocol.rst §21): both
directions, each with a link and its state, queue names escaped; what it waits for."""

from __future__ import annotations

import trioqueue
from tests._web_harness import client
from trioqueue.web import create_app

HOSTILE = "<b>q</b>"  # (a queue name holds no control characters: enqueue refuses them)


async def test_job_page_lists_dependencies_and_dependents(
    backend: trioqueue.MemoryBackend,
) -> None:
    first = await backend.enqueue(HOSTILE, "a")
    middle = await backend.enqueue("q", "m", depends_on=[first])
    last = await backend.enqueue("q", "z", depends_on=[middle])
    plain = await backend.enqueue("q", "plain")
    async with client(create_app(backend)) as c:
        page = (await c.get(f"/jobs/{middle}")).text
        none = (await c.get(f"/jobs/{plain}")).text
    assert f'<a href="/jobs/{first}">job {first}</a>' in page
    assert f'<a href="/jobs/{last}">job {last}</a>' in page
    assert page.count('data-testid="job-dependency"') == 1
    assert page.count('data-testid="job-dependent"') == 1
    assert '<span class="status ready">ready</span>' in page  # the first job's state
    assert '<span class="status scheduled">scheduled</span>' in page  # the last one's
    assert f'data-testid="job-waiting-on">waiting for {first}</p>' in page
    assert "<b>q</b>" not in page  # the queue name is escaped
    assert "&lt;b&gt;q&lt;/b&gt;" in page
    assert 'data-testid="job-dependency-none">none</p>' in none
    assert 'data-testid="job-dependent-none">none</p>' in none
    assert 'data-testid="job-waiting-on"' not in none
    assert 'data-testid="job-parent-none">none</p>' in page


async def test_job_page_lists_parent_and_children(backend: trioqueue.MemoryBackend) -> None:
    """docs/protocol.rst §22: a child links to its parent, the parent to its children."""
    parent = await backend.enqueue("q", "p")
    children = await backend.enqueue_many(HOSTILE, ["a", "b"], parent_id=parent)
    async with client(create_app(backend)) as c:
        page = (await c.get(f"/jobs/{parent}")).text
        child = (await c.get(f"/jobs/{children[0]}")).text
    assert page.count('data-testid="job-child"') == 2
    assert page.index(f"job {children[0]}</a>") < page.index(f"job {children[1]}</a>")
    assert "<b>q</b>" not in page
    assert f'<li data-testid="job-parent"><a href="/jobs/{parent}">job {parent}</a>' in child
