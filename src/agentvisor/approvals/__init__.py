"""Approvals: how an ``ask`` from the policy becomes allow or deny.

    broker = ApprovalBroker(config)                # terminal channel by default
    final = broker.resolve(action, context, engine.decide(action, context))

Channels (terminal now; a web dashboard or webhook later) implement `Channel`; the
first answer from any of them wins. Judges settle asks in ``approvals.mode: smart``.
"""

from __future__ import annotations

from ..state.asks import Answer, ApprovalRequest
from .broker import ApprovalBroker, check_grant_pattern
from .channel import Channel, Pending
from .judge import JUDGE_RULES, LLMJudge, RuleJudge
from .terminal import TerminalChannel

__all__ = [
    "JUDGE_RULES",
    "Answer",
    "ApprovalBroker",
    "ApprovalRequest",
    "Channel",
    "LLMJudge",
    "Pending",
    "RuleJudge",
    "TerminalChannel",
    "check_grant_pattern",
]
