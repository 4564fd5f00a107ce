"""The sans-IO pieces of pykbroker/security: SCRAM against RFC 7677's published exchange and
against bad, replayed and reordered messages; PLAIN; Kafka's JAAS syntax; principal mapping
rules; the authenticator's state machine."""
import base64
import hashlib
import hmac
import json

import pytest

from pykbroker.protocol.errors import ErrorCode
from pykbroker.security import scram
from pykbroker.security.authenticator import AUTHENTICATE, AUTHENTICATE_RAW, SaslAuthenticator
from pykbroker.security.errors import AuthenticationFailed
from pykbroker.security.jaas import JaasError, parse_jaas, plain_users
from pykbroker.security.plain import PlainServer
from pykbroker.config import ConfigError

# RFC 7677 section 3: user "user", password "pencil"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def _rfc_credential():
    salted = scram.salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)
    return scram.credential_from_salted_password("SCRAM-SHA-256", RFC_SALT, salted, 4096)


@pytest.fixture
def rfc_server(monkeypatch):
    monkeypatch.setattr(scram.secrets, "token_urlsafe", lambda n: RFC_SERVER_NONCE)
    cred = _rfc_credential()
    return scram.ScramServer("SCRAM-SHA-256", lambda u, m: cred if (u, m) == ("user", "SCRAM-SHA-256") else None)


def test_scram_sha256_matches_rfc7677(rfc_server):
    assert rfc_server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert rfc_server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert rfc_server.complete and rfc_server.authorization_id == "user"


def test_stored_credential_round_trips_and_holds_no_password():
    cred = _rfc_credential()
    text = cred.to_text()
    assert scram.ScramCredential.from_text(text) == cred
    assert "pencil" not in text and text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")


def _fail_message(mech="SCRAM-SHA-256"):
    return ("Authentication failed during authentication due to invalid credentials with SASL mechanism %s" % mech)


def test_wrong_proof_is_refused(rfc_server):
    rfc_server.evaluate(RFC_CLIENT_FIRST)
    bad = RFC_CLIENT_FINAL[:-6] + b"AAAAA="
    with pytest.raises(AuthenticationFailed) as e:
        rfc_server.evaluate(bad)
    assert str(e.value) == _fail_message()
    assert not rfc_server.complete and rfc_server.authorization_id is None


def test_unknown_user_fails_like_a_wrong_password(rfc_server):
    with pytest.raises(AuthenticationFailed) as e:
        rfc_server.evaluate(b"n,,n=nobody,r=abc")
    assert str(e.value) == _fail_message()


@pytest.mark.parametrize("final", [
    # the nonce of another exchange / the client nonce repeated before the combined one
    RFC_CLIENT_FINAL.replace(b"k0,", b"k1,"),
    RFC_CLIENT_FINAL.replace(b"r=", b"r=rOprNGfwEbeRWgbNEkqO"),
])
def test_wrong_nonce_is_refused(rfc_server, final):
    rfc_server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed) as e:
        rfc_server.evaluate(final)
    # the client is told Kafka's generic text; the reason stays in the broker's log
    assert str(e.value) == _fail_message() and "Invalid client nonce" in e.value.detail


def test_wrong_channel_binding_is_refused(rfc_server):
    rfc_server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):
        rfc_server.evaluate(RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"))   # "y,,"


def test_replayed_and_reordered_messages_are_refused(rfc_server):
    with pytest.raises(AuthenticationFailed):
        rfc_server.evaluate(RFC_CLIENT_FINAL)            # final first
    fresh = scram.ScramServer("SCRAM-SHA-256", lambda u, m: _rfc_credential())
    fresh.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(AuthenticationFailed):
        fresh.evaluate(RFC_CLIENT_FIRST)                 # client-first twice
    with pytest.raises(AuthenticationFailed):
        fresh.evaluate(RFC_CLIENT_FINAL)                 # and nothing after a failure


def test_a_completed_exchange_takes_no_more_tokens(rfc_server):
    rfc_server.evaluate(RFC_CLIENT_FIRST)
    rfc_server.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(AuthenticationFailed):
        rfc_server.evaluate(RFC_CLIENT_FINAL)


@pytest.mark.parametrize("first", [
    b"", b"\xff\xfe", b"garbage", b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc", b"n,,n=user",
    b"n,,n=us=er,r=abc", b"n,,n=user,r=abc,foo=bar", b"n,,n=user,r=abc,tokenauth=true",
    b"n,a=other,n=user,r=abc", b"n,,n=user,r=a,b",
])
def test_malformed_client_first_is_refused(rfc_server, first):
    with pytest.raises(AuthenticationFailed):
        rfc_server.evaluate(first)


def test_scram_sha512_with_an_independent_client():
    """SCRAM-SHA-512 end to end against a client written from RFC 5802 here."""
    cred = scram.new_credential("SCRAM-SHA-512", "s3cret", 8192)
    server = scram.ScramServer("SCRAM-SHA-512", lambda u, m: cred if u == "a,b=c" else None)
    first_bare = "n=a=2Cb=3Dc,r=clientnonce"
    server_first = server.evaluate(("n,," + first_bare).encode()).decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    assert attrs["r"].startswith("clientnonce") and attrs["i"] == "8192"
    salted = hashlib.pbkdf2_hmac("sha512", b"s3cret", base64.b64decode(attrs["s"]), 8192)
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    without_proof = "c=biws,r=" + attrs["r"]
    auth = ",".join((first_bare, server_first, without_proof)).encode()
    sig = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = base64.b64encode(bytes(x ^ y for x, y in zip(client_key, sig))).decode()
    final = server.evaluate((without_proof + ",p=" + proof).encode())
    server_key = hmac.digest(salted, b"Server Key", "sha512")
    assert final == b"v=" + base64.b64encode(hmac.digest(server_key, auth, "sha512"))
    assert server.authorization_id == "a,b=c"


# ------------------------------------------------------------------ PLAIN

USERS = {"alice": "secret"}


def test_plain_accepts_the_right_password():
    s = PlainServer(USERS)
    assert s.evaluate(b"\x00alice\x00secret") == b"" and s.authorization_id == "alice"
    s = PlainServer(USERS)
    s.evaluate(b"alice\x00alice\x00secret")   # authzid equal to the user
    assert s.complete


@pytest.mark.parametrize("token,message", [
    (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00bob\x00secret", "Authentication failed: Invalid username or password"),
    (b"alice\x00secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\x00\x00secret", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"bob\x00alice\x00secret", "Authentication failed: Client requested an authorization id that is different "
                               "from username"),
    (b"\x00alice\x00\xff", "Invalid SASL/PLAIN response: not UTF-8"),
])
def test_plain_refusals(token, message):
    with pytest.raises(AuthenticationFailed) as e:
        PlainServer(USERS).evaluate(token)
    assert str(e.value) == message


# ------------------------------------------------------------------ JAAS

def test_jaas_users_with_quotes_and_escapes():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="admin-secret"\n'
            '  user_admin="admin-secret" user_alice="a \\"quoted\\" pass;word" user_bob=bare;')
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'a "quoted" pass;word', "bob": "bare"}
    assert parse_jaas(text)[0][1] == "required"


@pytest.mark.parametrize("text", ["", "org.x.PlainLoginModule user_a=\"b\";",
                                  "org.x.PlainLoginModule required user_a=\"b\"",
                                  "org.x.PlainLoginModule required user_a;"])
def test_jaas_syntax_errors(text):
    with pytest.raises(JaasError) as e:
        parse_jaas(text)
    assert '"b"' not in str(e.value)   # never the values


# ------------------------------------------------------------------ principal mapping

def test_principal_mapping_rules():
    from pykbroker.security.tls import PrincipalMapper

    dn = "CN=Alice Smith,OU=Eng,O=Example,C=US"
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    m = PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT")
    assert m.name(dn) == "alice smith@eng"
    assert m.name("CN=x,O=y") == "CN=x,O=y"               # falls through to DEFAULT
    assert PrincipalMapper("RULE:^CN=([^,]*).*$/$1/U").name(dn) == "ALICE SMITH"
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:^CN=admin$/root/").name(dn)   # no rule matches: no principal
    with pytest.raises(ConfigError):
        PrincipalMapper("RULE:nonsense")


# ------------------------------------------------------------------ the state machine

class _Sec:
    mechanisms = ["PLAIN", "SCRAM-SHA-512"]
    plain_users = USERS


def test_authenticator_gates_requests_until_authenticated():
    a = SaslAuthenticator(_Sec(), lambda u, m: None)
    assert a.allows(18) and a.allows(17) and not a.allows(3) and not a.allows(36)
    assert a.handshake(1, "PLAIN") == {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    assert a.state == AUTHENTICATE and a.allows(36) and not a.allows(17) and not a.allows(3)
    r = a.authenticate(2, b"\x00alice\x00secret")
    assert r["error_code"] == 0 and a.complete and a.principal == "User:alice"
    assert a.authenticate(2, b"\x00alice\x00secret")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_authenticator_refusals_close_the_connection():
    a = SaslAuthenticator(_Sec(), lambda u, m: None, failed_delay_ms=100)
    r = a.handshake(1, "GSSAPI")
    assert r == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]}
    assert a.close_after is not None and a.close_after[1] == 0
    a = SaslAuthenticator(_Sec(), lambda u, m: None, failed_delay_ms=100)
    a.handshake(0, "PLAIN")
    assert a.state == AUTHENTICATE_RAW
    with pytest.raises(AuthenticationFailed):
        a.evaluate(b"\x00alice\x00nope")
    assert a.close_after == ("authentication failed", 0.1) and a.principal is None


# ------------------------------------------------------------------ OAUTHBEARER (unsecured)

def _jwt(claims, alg="none", sig=""):
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()   # noqa: E731
    return "%s.%s.%s" % (enc({"alg": alg}), enc(claims), sig)


def _first(jwt, gs2="n,,", ext=""):
    return ("%s\x01auth=Bearer %s\x01%s\x01" % (gs2, jwt, ext)).encode()


NOW_MS = 1_700_000_000_000


def _oauth(**options):
    from pykbroker.security.oauthbearer import OAuthBearerServer
    return OAuthBearerServer(options, lambda: NOW_MS)


def test_oauthbearer_accepts_an_unsecured_token():
    s = _oauth(unsecuredValidatorRequiredScope="read write")
    tok = _jwt({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000, "scope": ["read", "write", "x"]})
    assert s.evaluate(_first(tok, ext="traceId=123\x01")) == b""
    assert s.complete and s.authorization_id == "alice" and s.lifetime_ms == 60000
    s = _oauth(unsecuredValidatorPrincipalClaimName="upn", unsecuredValidatorScopeClaimName="scp",
               unsecuredValidatorRequiredScope="read")
    s.evaluate(_first(_jwt({"upn": "bob", "exp": NOW_MS / 1000 + 1, "scp": "read"}), gs2="n,a=bob,"))
    assert s.authorization_id == "bob"


@pytest.mark.parametrize("claims,alg,sig", [
    ({"sub": "alice", "exp": NOW_MS / 1000 - 1}, "none", ""),            # expired
    ({"sub": "alice"}, "none", ""),                                      # no exp
    ({"sub": "alice", "exp": "tomorrow"}, "none", ""),
    ({"exp": NOW_MS / 1000 + 60}, "none", ""),                           # no principal
    ({"sub": "", "exp": NOW_MS / 1000 + 60}, "none", ""),
    ({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 30}, "none", ""),   # issued in the future
    ({"sub": "alice", "exp": NOW_MS / 1000 + 60}, "RS256", "c2lnbmF0dXJl"),                # signed: not validated
])
def test_oauthbearer_refuses_bad_tokens_with_the_rfc7628_challenge(claims, alg, sig):
    s = _oauth()
    challenge = s.evaluate(_first(_jwt(claims, alg, sig)))
    assert json.loads(challenge) == {"status": "invalid_token"} and not s.complete
    with pytest.raises(AuthenticationFailed) as e:
        s.evaluate(b"\x01")   # the client's acknowledgement, then the failure
    assert str(e.value) == '{"status":"invalid_token"}'


def test_oauthbearer_insufficient_scope_and_skew():
    s = _oauth(unsecuredValidatorRequiredScope="requiredScope")
    challenge = s.evaluate(_first(_jwt({"sub": "alice", "exp": NOW_MS / 1000 + 60, "scope": "other requiredScope"})))
    # Kafka's exact text: a string claim is one scope; the required ones printed as a Java list
    assert challenge == b'{"status":"insufficient_scope", "scope":"[requiredScope]"}'
    s = _oauth(unsecuredValidatorAllowableClockSkewMs="5000")
    s.evaluate(_first(_jwt({"sub": "alice", "exp": NOW_MS / 1000 - 2})))   # within the skew
    assert s.complete


@pytest.mark.parametrize("token", [b"", b"garbage", b"n,,auth=Bearer x", b"n,,\x01auth=Basic abc\x01\x01",
                                   b"y,,\x01auth=Bearer a..\x01\x01", b"\xff\x01\x01"])
def test_oauthbearer_malformed_messages(token):
    with pytest.raises(AuthenticationFailed):
        _oauth().evaluate(token)


def test_oauthbearer_authzid_must_be_the_principal():
    with pytest.raises(AuthenticationFailed, match="authorization id"):
        _oauth().evaluate(_first(_jwt({"sub": "alice", "exp": NOW_MS / 1000 + 60}), gs2="n,a=mallory,"))
