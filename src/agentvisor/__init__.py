"""agentvisor: an independent security layer for AI agents."""
