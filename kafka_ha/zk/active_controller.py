"""Who ZooKeeper says the controller is: ``/controller`` and ``/controller_epoch``, read together.

A broker reads this before it obeys a controller epoch higher than any it has
seen (see ``broker/controller_requests.py``).  Both reads are sent before
either answer is awaited: one round trip.
"""
from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafka_ha.zk import znodes as zn
from kafka_ha.zk.errors import MalformedZnode


def read_active_controller(client: KazooClient) -> tuple[int | None, int]:
    """(controller id or None, controller epoch or 0); a malformed znode counts as absent."""
    paths = (zn.ControllerZNode.PATH, zn.ControllerEpochZNode.PATH)
    controller_read, epoch_read = (client.get_async(p) for p in paths)
    try:
        controller = zn.ControllerZNode.decode(controller_read.get()[0])
    except (MalformedZnode, NoNodeError):
        controller = None
    try:
        epoch = zn.ControllerEpochZNode.decode(epoch_read.get()[0])
    except (MalformedZnode, NoNodeError):
        epoch = 0
    return controller, epoch
