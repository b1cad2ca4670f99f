"""Receipts: the one content-free record of each call, and how they are written."""

from voxproxy.receipts.model import BargeInRecord, Receipt, TurnRecord

__all__ = ["BargeInRecord", "Receipt", "TurnRecord"]
