"""moto_server with one change: a TransactWriteItems call keeps, for its
rollback, a copy of each item it names instead of a copy of each table.

moto 5.2.1 deep-copies every table a transaction names, to put the copy back
if the transaction is refused. The local stack's tables hold tens of
thousands of items after a test package has run a while: each transaction
then copied them all, a single write took seconds (the SDK timed out and
retried), copies made while another request wrote the same table failed
("dictionary changed size during iteration"), and the server grew past
20 GB. A refused transaction has to undo only the writes it made, which are
to the items it names: this wrapper reads each of them before the call
(a deep copy of the item, or its absence), lets moto's own code run with
its table copies turned into the tables themselves (so its rollback puts
back what is already there), and on a refused call writes each named item
back as it was. Outcomes are unchanged; TestTransactionsDifferential
(internal/devstack) checks them against AWS's documented behaviour.

Usage: python3 moto-server.py <moto_server arguments>
"""

import copy
import sys
import threading

from moto.dynamodb import models
from moto.server import main

_local = threading.local()


class _NoTableCopyInTransactions:
    """The copy module as moto.dynamodb.models sees it: inside a
    TransactWriteItems call, a table is not copied (the wrapper keeps the
    named items instead). Everything else is copied as before."""

    def __getattr__(self, name):
        return getattr(copy, name)

    def deepcopy(self, obj, memo=None):
        if getattr(_local, "in_transaction", False) and memo is None and isinstance(obj, models.Table):
            return obj
        return copy.deepcopy(obj, memo)


_transact_write_items = models.DynamoDBBackend.transact_write_items


def _named_items(backend, transact_items):
    """(table name, key, attributes as they are now or None) of each item
    the call names that exists in a known table."""
    out = []
    for item in transact_items:
        try:
            op_type, op = next(iter(item.items()))
            table_name = op["TableName"]
            if table_name not in backend.tables:
                continue
            table = backend.get_table(table_name)
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            current = backend.get_item(table_name, key)
        except Exception:
            continue  # a malformed item: moto's own code refuses the call before any write
        before = copy.deepcopy(current.to_json()["Attributes"]) if current is not None else None
        out.append((table_name, key, before))
    return out


def transact_write_items(self, transact_items):
    named = _named_items(self, transact_items)
    _local.in_transaction = True
    try:
        return _transact_write_items(self, transact_items)
    except Exception:
        # Refused (a failed condition, a validation error): undo the writes
        # made before the refusal, item by item.
        for table_name, key, before in named:
            if before is None:
                if self.get_item(table_name, key) is not None:
                    self.delete_item(table_name, key)
            else:
                self.put_item(table_name, before)
        raise
    finally:
        _local.in_transaction = False


models.copy = _NoTableCopyInTransactions()
models.DynamoDBBackend.transact_write_items = transact_write_items

if __name__ == "__main__":
    sys.exit(main())
