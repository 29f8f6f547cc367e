"""auth.*: a bot signs in with its token, and carries its authorization to another data centre;
a person signs in to their own account (a user session) with the code Telegram sends to their
apps, then their two-step verification password if set."""

from __future__ import annotations

import hashlib
import re
import secrets

from pyrogram import raw
from pyrogram.crypto.prime import CURRENT_DH_PRIME

from inmemory_telegram import limits, render, wire
from inmemory_telegram.faults import RpcFault
from inmemory_telegram.methods.common import (
    Table,
)

METHODS = Table()

EXPORTED_BYTES = 32  # inferred: the length of an exported authorization's bytes (opaque to clients)

# The login code Telegram sends to the account's apps (auth.sentCodeTypeApp names its length):
# five digits is what Telegram's apps show; inferred.
CODE_LENGTH = 5
# SRP for two-step verification (core.telegram.org/api/srp): the algorithm Telegram names,
# g and the 2048-bit prime it gives (the same as its key exchange's: kurigram's CURRENT_DH_PRIME).
SRP_G = 3
SRP_P = CURRENT_DH_PRIME.to_bytes(256, "big")


@METHODS.method("auth.ImportBotAuthorization")
def import_bot_authorization(server, query):
    bot = next((b for b in server.bots.values() if b.token == query.bot_auth_token), None)
    if bot is None or bot.revoked:
        raise RpcFault("ACCESS_TOKEN_INVALID")
    endpoint = server.current_endpoint()
    server.authorized[(endpoint.dc_id, wire.key_id(endpoint.auth_key))] = bot.id
    return raw.types.auth.Authorization(user=render.bot_tl(bot))


@METHODS.method("auth.ExportAuthorization")
def export_authorization(server, query):
    """Bytes that sign a key in on DC `dc_id` (core.telegram.org/api/datacenter): asked on a
    connection signed in already, for another production DC (DC_ID_INVALID otherwise)."""
    if query.dc_id not in limits.DCS or query.dc_id == server.current_endpoint().dc_id:
        raise RpcFault("DC_ID_INVALID")
    bot = server.acting_bot()
    data = secrets.token_bytes(EXPORTED_BYTES)
    server.exported[data] = (query.dc_id, bot.id)
    return raw.types.auth.ExportedAuthorization(id=bot.id, bytes=data)


@METHODS.method("auth.ImportAuthorization")
def import_authorization(server, query):
    """Sign the connection's key in to the bot with bytes exported for this DC. Inferred: the bytes
    serve once, for the bot that exported them, and only on the DC they were exported for
    (AUTH_BYTES_INVALID otherwise)."""
    endpoint = server.current_endpoint()
    bot = server.bots.get(query.id)
    if bot is None or server.exported.pop(query.bytes, None) != (endpoint.dc_id, bot.id):
        raise RpcFault("AUTH_BYTES_INVALID")
    if bot.revoked:
        raise RpcFault("AUTH_KEY_UNREGISTERED")
    server.authorized[(endpoint.dc_id, wire.key_id(endpoint.auth_key))] = bot.id
    return raw.types.auth.Authorization(user=render.bot_tl(bot))


def digits(phone: str) -> str:
    return re.sub(r"\D", "", phone or "")


@METHODS.method("auth.SendCode")
def send_code(server, query):
    phone = digits(query.phone_number)
    if not 7 <= len(phone) <= 15:  # E.164: at most 15 digits; inferred: fewer than 7 is no number
        raise RpcFault("PHONE_NUMBER_INVALID")
    code_hash = secrets.token_hex(9)
    account = server.accounts.get(phone)
    if account is not None:
        account.code = "".join(secrets.choice("0123456789") for _ in range(CODE_LENGTH))
        account.code_hash = code_hash
    server.logging_in[server.caller_key] = phone
    return raw.types.auth.SentCode(type=raw.types.auth.SentCodeTypeApp(length=CODE_LENGTH), phone_code_hash=code_hash)


@METHODS.method("auth.SignIn")
def sign_in(server, query):
    phone = digits(query.phone_number)
    if server.logging_in.get(server.caller_key) != phone:
        raise RpcFault("PHONE_CODE_EXPIRED")  # inferred: no code was sent to this number in this session
    account = server.accounts.get(phone)
    if account is None:
        raise RpcFault("PHONE_NUMBER_UNOCCUPIED")
    if not query.phone_code:
        raise RpcFault("PHONE_CODE_EMPTY")
    if not account.code or query.phone_code_hash != account.code_hash:
        raise RpcFault("PHONE_CODE_EXPIRED")
    if query.phone_code != account.code:
        raise RpcFault("PHONE_CODE_INVALID")
    account.code = ""
    if account.password:
        server.password_pending[server.caller_key] = _Srp(account.password)
        raise RpcFault("SESSION_PASSWORD_NEEDED", 401)
    return _signed_in(server, account)


def _signed_in(server, account):
    server.logging_in.pop(server.caller_key, None)
    server.password_pending.pop(server.caller_key, None)
    server.signed_in[server.caller_key] = account.user_id
    return raw.types.auth.Authorization(user=render.self_tl(server.users[account.user_id]))


@METHODS.method("auth.CheckPassword")
def check_password(server, query):
    srp = server.password_pending.get(server.caller_key)
    check = query.password
    if srp is None or not isinstance(check, raw.types.InputCheckPasswordSRP) or check.srp_id != srp.srp_id:
        raise RpcFault("SRP_ID_INVALID")
    if not srp.verifies(check.A, check.M1):
        raise RpcFault("PASSWORD_HASH_INVALID")
    return _signed_in(server, server.accounts[server.logging_in[server.caller_key]])


def password_state(server):
    """account.getPassword's answer for a login waiting for its password (methods/account.py)."""
    srp = server.password_pending.get(server.caller_key)
    if srp is None:
        raise RpcFault("AUTH_KEY_UNREGISTERED", 401)  # inferred: nothing to check on this key
    return raw.types.account.Password(
        has_password=True,
        current_algo=srp.algo,
        srp_B=_itob(srp.B),
        srp_id=srp.srp_id,
        new_algo=raw.types.PasswordKdfAlgoUnknown(),
        new_secure_algo=raw.types.SecurePasswordKdfAlgoUnknown(),
        secure_random=secrets.token_bytes(32),
    )


def _sha256(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


def _itob(n: int) -> bytes:
    return n.to_bytes(256, "big")


class _Srp:
    """The server's half of SRP-2048 as core.telegram.org/api/srp gives it: v = g^x, B = k*v + g^b,
    and M1 = H(H(p) xor H(g) | H(salt1) | H(salt2) | A | B | K) with K = H((A * v^u)^b)."""

    def __init__(self, password: str):
        self.algo = raw.types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
            salt1=secrets.token_bytes(8), salt2=secrets.token_bytes(16), g=SRP_G, p=SRP_P
        )
        salt1, salt2 = self.algo.salt1, self.algo.salt2
        hash2 = _sha256(salt2, _sha256(salt1, password.encode(), salt1), salt2)
        x = int.from_bytes(_sha256(salt2, hashlib.pbkdf2_hmac("sha512", hash2, salt1, 100000), salt2), "big")
        self.p = CURRENT_DH_PRIME
        self.v = pow(SRP_G, x, self.p)
        k = int.from_bytes(_sha256(SRP_P, _itob(SRP_G)), "big")
        self.b = int.from_bytes(secrets.token_bytes(256), "big")
        self.B = (k * self.v + pow(SRP_G, self.b, self.p)) % self.p
        self.srp_id = secrets.randbits(63)

    def verifies(self, a_bytes: bytes, m1: bytes) -> bool:
        A = int.from_bytes(a_bytes, "big")  # noqa: N806 - SRP's names
        if not 1 < A < self.p - 1:
            return False
        u = int.from_bytes(_sha256(_itob(A), _itob(self.B)), "big")
        K = _sha256(_itob(pow(A * pow(self.v, u, self.p), self.b, self.p)))  # noqa: N806
        h_pg = bytes(x ^ y for x, y in zip(_sha256(SRP_P), _sha256(_itob(SRP_G)), strict=True))
        salt1, salt2 = self.algo.salt1, self.algo.salt2
        return secrets.compare_digest(m1, _sha256(h_pg, _sha256(salt1), _sha256(salt2), _itob(A), _itob(self.B), K))
