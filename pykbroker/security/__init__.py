"""Security of a listener: TLS, SASL authentication and the principal of each connection.

- ``listeners.py``: a listener's effective security settings (Kafka's ``listener.name.<l>.``
  overrides over the broker-wide ``ssl.*`` / ``sasl.*`` keys), built once at start-up so a bad
  setting stops the broker instead of failing its first client.
- ``tls.py``: the server ``ssl.SSLContext`` (PEM files or Kafka's inline PEM configs) and the
  principal of a client certificate.
- ``authenticator.py``: the SASL state machine of one connection (SaslHandshake,
  SaslAuthenticate, the v0 raw-token framing, what is allowed before authentication).
- ``plain.py``, ``scram.py``: the mechanisms, sans-IO (bytes in, bytes or a failure out).
- ``jaas.py``: Kafka's JAAS config syntax (the PLAIN users).
- ``credentials.py``: the SCRAM credential store (salted keys only, never a password).

A connection's principal is ``User:ANONYMOUS`` on PLAINTEXT, the client certificate's mapped DN
on SSL, and ``User:<name>`` once SASL authentication succeeds (Kafka's
DefaultKafkaPrincipalBuilder); authorization will read it from the connection.
"""
