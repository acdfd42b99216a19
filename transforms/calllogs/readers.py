"""Importing this module registers every built-in call-log reader (``calls.CALL_LOG_READERS``).

Kept apart from ``transforms/calllogs/__init__.py`` so that ``transforms.calllogs.calls`` (the
contract, and ``CALL_LOG_KEYS``) imports nothing of ``transforms.formats``, which the readers
themselves use: ``transforms.formats`` may import the contract without an import cycle.
"""

from transforms.calllogs import labels, langfuse, langsmith, proxies, spans  # noqa: F401
from transforms.calllogs.calls import CALL_LOG_READERS, detect_call_log

__all__ = ["CALL_LOG_READERS", "detect_call_log"]
