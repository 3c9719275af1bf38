"""Regular expressions compiled on first use.

Compiling costs tens to hundreds of microseconds a pattern, and most of the policy's
patterns are never needed by a given run of `agentvisor exec`. `re`'s own cache would also
compile lazily, but it evicts under the many patterns user rules compile: these stay.
"""

from __future__ import annotations

import functools
import re


@functools.cache
def regex(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)
