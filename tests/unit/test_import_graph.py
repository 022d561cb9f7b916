"""The shape of kafka_ha's import graph: no cycles, and ZooKeeper's client only in kafka_ha.zk.

The graph comes from grimp (import-linter's graph library), which reads every
``import`` in the source, those inside functions too: a lazy import that
closes a circle is still a circle, only one that a reader cannot see at the
top of the file.  A failure names each import that closes a cycle, with its
file and line.
"""
from __future__ import annotations

import sys

import grimp
import pytest

PACKAGE = "kafka_ha"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # No cache: it would be written into the working tree, and building takes a second.
    return grimp.build_graph(PACKAGE, include_external_packages=True, cache_dir=None)


def strongly_connected(nodes: list[str], edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted.

    >>> strongly_connected(["a", "b", "c", "d"], {"a": ["b"], "b": ["c", "a"], "c": ["d"]})
    [['a', 'b']]
    >>> strongly_connected(["a", "b"], {"a": ["b"]})
    []
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(nodes) + 100))
    try:
        for node in nodes:
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(components)


def describe_cycle(graph: grimp.ImportGraph, members: list[str]) -> str:
    lines = [f"cycle through {', '.join(members)}:"]
    for importer in members:
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported in members:
                for d in graph.get_import_details(importer=importer, imported=imported):
                    lines.append(f"  {importer}:{d['line_number']} imports {imported}: "
                                 f"{d['line_contents'].strip()}")
    return "\n".join(lines)


def test_no_module_is_part_of_an_import_cycle(graph: grimp.ImportGraph) -> None:
    modules = sorted(m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + "."))
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in modules)
             for m in modules}
    cycles = strongly_connected(modules, edges)
    assert not cycles, "\n".join(describe_cycle(graph, c) for c in cycles)


def test_no_package_depends_on_its_siblings_in_a_circle(graph: grimp.ImportGraph) -> None:
    """Areas (kafka_ha.broker, kafka_ha.zk...) and the packages inside them form layers:
    counting every module's imports as its package's, no two depend on each other."""
    packages = sorted(m for m in graph.modules if m.startswith(PACKAGE) and graph.find_children(m))
    assert PACKAGE in packages and len(packages) > 5  # the graph saw the subpackages
    breakers = {p: graph.nominate_cycle_breakers(p) for p in packages}
    assert {p: b for p, b in breakers.items() if b} == {}, (
        "imports to remove so that each package's children form no cycle")


def test_only_kafka_ha_zk_imports_the_zookeeper_client(graph: grimp.ImportGraph) -> None:
    importers = {m for m in graph.find_modules_that_directly_import("kazoo")
                 if not m.startswith(PACKAGE + ".zk.")}
    assert any(m.startswith(PACKAGE + ".zk.")
               for m in graph.find_modules_that_directly_import("kazoo"))  # the graph saw kazoo
    assert importers == set(), "outside kafka_ha.zk, ZooKeeper is reached only through its stores"
