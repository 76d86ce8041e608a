"""moto_server with one change: a TransactWriteItems call copies each table
it names once, not once per item.

moto 5.2.1 keeps a deep copy of a table for every item of a transaction that
names it, to roll back if the transaction is refused; only the last copy of
each table is kept. A 25-item transaction on one table thus copied the whole
table 25 times, and the local stack's tables hold thousands of items after a
test package has run a while: a single write took seconds, the SDK timed out
and retried, and tests failed on time bounds. All copies of one call are made
before any write of it, so they are equal; keeping the first changes no
outcome, only the cost (one copy per table per call).

Usage: python3 moto-server.py <moto_server arguments>
"""

import copy
import sys
import threading

from moto.dynamodb import models
from moto.server import main

_local = threading.local()


class _CopyOncePerTransaction:
    """The copy module as moto.dynamodb.models sees it: inside a
    TransactWriteItems call, deepcopy of a table already copied in that call
    returns the same copy. Everything else is copied as before."""

    def __getattr__(self, name):
        return getattr(copy, name)

    def deepcopy(self, obj, memo=None):
        copies = getattr(_local, "copies", None)
        if copies is None or memo is not None or not isinstance(obj, models.Table):
            return copy.deepcopy(obj, memo)
        key = id(obj)
        if key not in copies:
            copies[key] = (obj, copy.deepcopy(obj))  # obj kept: its id stays its own
        return copies[key][1]


_transact_write_items = models.DynamoDBBackend.transact_write_items


def transact_write_items(self, transact_items):
    _local.copies = {}
    try:
        return _transact_write_items(self, transact_items)
    finally:
        _local.copies = None


models.copy = _CopyOncePerTransaction()
models.DynamoDBBackend.transact_write_items = transact_write_items

if __name__ == "__main__":
    sys.exit(main())
