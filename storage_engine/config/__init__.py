"""Kafka's topic-level and broker-level log configuration: names, defaults, validators, precedence.

Users bring Kafka habits (``--config retention.ms=...``, a broker ``server.properties``), so the
keys, defaults, ranges and error texts are Kafka's (``LogConfig``/``ConfigDef``/
``KafkaConfig``). Every value is parsed and checked here before any caller touches disk; an
error names the key, the value and what is allowed.

Precedence, as in Kafka: a topic override beats the broker's ``log.*`` value, which beats the
built-in default. Within the broker, the finer unit wins (``log.retention.ms`` over
``log.retention.minutes`` over ``log.retention.hours``).

The package holds one idea per module: ``values`` (Kafka's ``ConfigDef`` types, ranges and
validators), ``topic`` (the topic-level keys and ``LogConfig``), ``broker`` (a broker's
``log.*`` keys as topic defaults, and the broker-level limits), ``cleaner`` (the cleaner's
``CleanerConfig``) and ``properties`` (reading a broker's ``server.properties``). The engine's
``LOGPLAT_*`` variables are read in ``logdir.environment``, since checking the log dirs they
name is the log manager's rule.
"""
