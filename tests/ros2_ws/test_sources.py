"""Which publisher sent a message: refused messages are attributed against the graph when
read, so the edit node's first commands (received before the graph knew its publisher) are
not counted as another node's."""

from __future__ import annotations

from types import SimpleNamespace

from edgerl_ros.sources import PublisherFilter

EDIT, OTHER = [1] * 16, [2] * 16


class Graph:
    """The two graph queries the filter makes, with endpoints added as discovery goes on."""

    def __init__(self) -> None:
        self.endpoints: list[SimpleNamespace] = []

    def resolve_topic_name(self, topic: str) -> str:
        return "/" + topic

    def get_publishers_info_by_topic(self, topic: str) -> list[SimpleNamespace]:
        assert topic == "/robot/command"
        return list(self.endpoints)

    def discover(self, node_name: str, gid: list[int]) -> None:
        self.endpoints.append(SimpleNamespace(node_name=node_name, endpoint_gid=gid))


def info(gid):
    return {"publisher_gid": {"data": gid}}


def test_early_messages_of_the_node_are_not_foreign():
    graph = Graph()
    filt = PublisherFilter(graph, "robot/command", "edit_policy_node", recheck_s=0.0)
    assert not filt.accept(info(EDIT))  # before discovery: refused (safe for a robot)
    assert not filt.accept(info(EDIT))
    assert not filt.accept(info(OTHER))
    graph.discover("edit_policy_node", EDIT)
    graph.discover("intruder", OTHER)
    assert filt.accept(info(EDIT)) and not filt.accept(info(OTHER))
    assert not filt.accept({"publisher_gid": None})  # no GID: never ours
    assert (filt.accepted, filt.foreign, filt.early) == (1, 3, 2)


def test_a_node_that_left_the_graph_stays_known():
    graph = Graph()
    filt = PublisherFilter(graph, "robot/command", "edit_policy_node", recheck_s=0.0)
    graph.discover("edit_policy_node", EDIT)
    assert filt.accept(info(EDIT))
    graph.endpoints.clear()  # stopped before the report is read
    assert filt.accept(info(EDIT)) and filt.foreign == 0
