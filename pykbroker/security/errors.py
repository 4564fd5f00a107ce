"""The failure of an authentication step."""


class AuthenticationFailed(Exception):
    """A mechanism refused a token.  ``str(e)`` is what the client may be told (Kafka's text;
    never a secret, never whether a user exists); ``internal``: an illegal use of the mechanism
    rather than bad credentials."""

    def __init__(self, message: str, internal: bool = False):
        super().__init__(message)
        self.internal = internal
