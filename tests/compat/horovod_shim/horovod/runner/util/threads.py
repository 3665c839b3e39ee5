"""The one helper Horovod's test utilities import from its launcher package."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs ``target(*args)`` on a new thread, started, and returns the thread."""
    del silent  # the launcher's option to swallow exceptions; the tests never set it
    thread = threading.Thread(target=target, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
