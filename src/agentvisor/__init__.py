"""agentvisor: an independent security layer for AI agents."""


def version() -> str:
    """The installed version; pyproject.toml's ``version`` is the one place it is written.
    (importlib.metadata is slow to import: only asked when needed.)"""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("agentvisor")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
