"""``logctl``: Kafka's command-line tools for the engine's log dirs.

Modelled on kafka-topics, kafka-console-producer/-consumer, kafka-dump-log and
kafka-delete-records: one module per command, each declaring its arguments, how it opens the
log dirs, its precheck and its run (:class:`~.command.Command`); :mod:`.main` does the rest for
all of them. Every command validates its whole input before it changes anything; errors (bad
usage included) go to stderr as one line, with exit status 1, and leave the disk as it was.
"""

from .main import console, main

__all__ = ["console", "main"]
