"""The failure of an authentication step."""


class AuthenticationFailed(Exception):
    """A mechanism refused a token.  ``str(e)`` is what the client is told (Kafka's text; never a
    secret, never whether a user exists); ``detail``: the specific reason, for the broker's log
    only; ``internal``: an illegal use of the mechanism rather than bad credentials;
    ``passthrough``: Kafka passes this text on as it is (a SaslAuthenticationException)."""

    def __init__(self, message: str, internal: bool = False, detail: str | None = None,
                 passthrough: bool = False) -> None:
        super().__init__(message)
        self.internal = internal
        self.detail = detail
        self.passthrough = passthrough
