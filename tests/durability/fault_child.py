"""A real broker process whose storage goes through FaultFS, with a fault hook: when the file
``<trigger>`` appears, every storage operation under each listed log dir starts failing with EIO.

    python -m tests.durability.fault_child <root> <trigger> <log_dir>[,<log_dir>...] [fail_dir ...]

``fail_dir`` defaults to every log dir.  Prints the same "ready, listening on" line as
``pykbroker serve`` so ``BrokerProcess``-style readers find the port."""
import errno
import logging
import os
import sys

import trio

from pykbroker.broker import BrokerServer
from pykbroker.config import BrokerConfig
from pykbroker.storage.faultfs import FaultFS

FAIL_OPS = ["pwrite", "fsync", "pread", "ftruncate", "create", "open_write", "rename", "remove"]


async def main(root, trigger, dirs, fail_dirs):
    fs = FaultFS(root)
    broker = BrokerServer(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": ",".join(dirs),
                                  "group.initial.rebalance.delay.ms": "0"}))
    broker.storage_fs = fs
    async with trio.open_nursery() as n:
        await n.start(broker.run)
        while not os.path.exists(trigger):
            await trio.sleep(0.02)
        for d in fail_dirs:
            fs.fail(errno.EIO, FAIL_OPS, under=d)
        logging.getLogger("fault_child").warning("injected EIO under %s", ", ".join(fail_dirs))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    root, trigger, dirs = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    trio.run(main, root, trigger, dirs, sys.argv[4:] or dirs)
