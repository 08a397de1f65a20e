#!/usr/bin/env python3
"""Writes vectors.json: one signed request per preset.

Vectors marked "documented" are copied from the provider's documentation or official
SDK (the "source" field says where). The others are computed here, with Python's
hmac/hashlib and the cryptography package, from the algorithm the provider documents:
an implementation independent of the Go code under test. Rerun after editing:
    python3 generate.py > vectors.json
"""
import base64, hashlib, hmac, json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def mac(alg, key, msg):
    return hmac.new(key.encode(), msg.encode(), getattr(hashlib, alg)).digest()


def hexmac(alg, key, msg):
    return mac(alg, key, msg).hex()


def b64mac(alg, key, msg):
    return base64.b64encode(mac(alg, key, msg)).decode()


def basic(cred):
    return "Basic " + base64.b64encode(cred.encode()).decode()


T = 1679479653  # when the computed vectors were signed; "now" in each is 10 s later
vectors = []


def add(provider, source, secret, headers, body, want_id, now=T + 10, url="", query="", method="POST",
        sig_header="", timestamped=False, body_signed=True, want_type="", answer=None, signature_only=False,
        other_secrets=None):
    v = dict(provider=provider, source=source, secret=secret, headers=headers, body=body,
             url=url, query=query, method=method, now=now, want_id=want_id, want_type=want_type,
             sig_header=sig_header, timestamped=timestamped, body_signed=body_signed)
    if signature_only:
        v["signature_only"] = True
    if other_secrets:
        v["other_secrets"] = other_secrets
    vectors.append(v)


# ---- documented vectors ----
slack_body = ("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
              "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
              "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
              "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
add("slack", "documented: Slack, Verifying requests from Slack, step-by-step walk-through (a slash command)",
    "8f742231b10e8888abcd99yyyzzz85a5",
    {"X-Slack-Request-Timestamp": "1531420618", "Content-Type": "application/x-www-form-urlencoded",
     "X-Slack-Signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"},
    slack_body, "|398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", now=1531420618,
    sig_header="X-Slack-Signature", timestamped=True)

add("twilio", "documented: twilio-go (official Go SDK) client/request_validator_test.go, the example of Twilio's "
    "webhook security docs (auth token 12345, https://mycompany.com/myapp.php?foo=1&bar=2)",
    "12345",
    {"X-Twilio-Signature": "RSOYDt4T1cUTdK1PDd93/VVr8B8=", "Content-Type": "application/x-www-form-urlencoded",
     "I-Twilio-Idempotency-Token": "e5c1bd1e-1b3c-4d3e-9f3a-0a8d2c4c4a11"},
    "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212",
    "e5c1bd1e-1b3c-4d3e-9f3a-0a8d2c4c4a11", url="https://mycompany.com/myapp.php", query="foo=1&bar=2",
    sig_header="X-Twilio-Signature")

add("square", "documented: Square, Validate notifications (signature key asdf1234, notification URL "
    "https://example.com/webhook, body {\"hello\":\"world\"}); the same vector is in square-go-sdk's tests. "
    "It carries no event_id, so the test reads its identity as the body's hash",
    "asdf1234", {"X-Square-Hmacsha256-Signature": "2kRE5qRU2tR+tBGlDwMEw2avJ7QM4ikPYD/PJ3bd9Og="},
    '{"hello":"world"}', "body_hash", url="https://example.com/webhook", sig_header="X-Square-Hmacsha256-Signature")

add("sendgrid", "documented: sendgrid-go (official Go SDK) helpers/eventwebhook/eventwebhook_test.go (public key, "
    "signature, timestamp 1588788367, and the payload json.Marshal makes of its map). It is one object, not "
    "the list SendGrid posts, so the test reads its identity as /message_id",
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==",
    {"X-Twilio-Email-Event-Webhook-Timestamp": "1588788367",
     "X-Twilio-Email-Event-Webhook-Signature": "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="},
    '{"category":"example_payload","event":"test_event","message_id":"message_id"}', "message_id", now=1588788367,
    sig_header="X-Twilio-Email-Event-Webhook-Signature", timestamped=True)

paddle_body = ('{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,'
               '"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":'
               '{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,'
               '"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},'
               '"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created",'
               '"occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}')
add("paddle", "documented: paddle-go-sdk (official Go SDK) example_webhook_verifier_test.go (exampleSecretKey, "
    "exampleSignature, examplePayload: a price.created notification)",
    "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr",
    {"Paddle-Signature": "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"},
    paddle_body, "evt_01hsdn97563968dy0szkmgjwh3", now=1710929255, want_type="price.created",
    sig_header="Paddle-Signature", timestamped=True)

# Typeform's SDK signs {"foo":"bar"}, which carries no event_id: the test reads its
# identity as the body's hash, and the computed vector below checks a real delivery.
add("typeform", "documented: Typeform's official JS SDK (Typeform/js-api-client) tests/unit/verify-signature.test.ts "
    "(secret my-webook-secret, payload JSON.stringify({foo: 'bar'}), its sha256= signature)",
    "my-webook-secret", {"Typeform-Signature": "sha256=X2b3nUhiGjaWHxmPO/YQzUvHXBNac4gPjZ5/bjXrhQY="},
    '{"foo":"bar"}', "body_hash", sig_header="Typeform-Signature")

# Paddle's PHP SDK checks rotation: two h1 values (one not a signature) and three
# secrets, the last of which signed. Its body is not JSON.
add("paddle", "documented: paddle-php-sdk (official PHP SDK) tests/Unit/Notifications/VerifierTest.php "
    "it_verifies_a_signature (three secrets, the third signed; Paddle-Signature with a dummy h1 and the real one)",
    "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh",
    {"Paddle-Signature": "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"},
    "hello-world", "", now=1696195954, sig_header="Paddle-Signature", timestamped=True, signature_only=True,
    other_secrets=["pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
                   "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo"])

# ---- computed from the documented algorithm ----
ts = str(T)
body = ('{"event_id":"01GW0X8BCCDKKCPV0AMXX3PBR0","event_type":"form_response","form_response":'
        '{"form_id":"lT4Z3j","token":"a3a12ec67a1365927098a606107fac15","submitted_at":"2023-03-22T10:07:33Z"}}')
sec = "typeform-webhook-secret"
add("typeform", "computed: Typeform, Secure your webhooks: sha256= base64 HMAC-SHA256 of the body", sec,
    {"Typeform-Signature": "sha256=" + b64mac("sha256", sec, body)}, body, "01GW0X8BCCDKKCPV0AMXX3PBR0",
    want_type="form_response", sig_header="Typeform-Signature")

body = ('{"created_at":"2023-03-22T10:07:33.000000Z","created_by":"https://api.calendly.com/users/AAAAAAAAAAAAAAAA",'
        '"event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA"}}')
sec = "calendly-signing-key"
add("calendly", "computed: Calendly, Webhook signatures: t=..,v1=hex HMAC-SHA256 of t.body", sec,
    {"Calendly-Webhook-Signature": f"t={ts},v1={hexmac('sha256', sec, ts + '.' + body)}"}, body,
    "invitee.created|https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA|2023-03-22T10:07:33.000000Z",
    want_type="invitee.created", sig_header="Calendly-Webhook-Signature", timestamped=True)

body = ('{"type":"notification_event","id":"notif_ccd8a4d2-b6b1-4cb6-9a7a-ee2d1b9c2d4e",'
        '"topic":"conversation.user.created","created_at":1679479653,"data":{"item":{"id":"1"}}}')
sec = "intercom-client-secret"
add("intercom", "computed: Intercom, Webhooks signed notifications: X-Hub-Signature sha1= hex HMAC-SHA1 of the body", sec,
    {"X-Hub-Signature": "sha1=" + hexmac("sha1", sec, body)}, body, "notif_ccd8a4d2-b6b1-4cb6-9a7a-ee2d1b9c2d4e",
    want_type="conversation.user.created", sig_header="X-Hub-Signature")

body = ('{"id":"01GW0Y7Q4M7M8T6E2ZV1Q6X9QW","type":"zen:event-type:ticket.created",'
        '"time":"2023-03-22T10:07:33Z","account_id":123,"detail":{"id":"35"}}')
sec = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ=="  # the static secret Zendesk documents for test webhooks
zts = "2023-03-22T10:07:33Z"
add("zendesk", "computed: Zendesk, Verifying webhook authenticity: base64 HMAC-SHA256 of timestamp + body "
    "(secret: the static one Zendesk documents for test webhooks)", sec,
    {"X-Zendesk-Webhook-Signature-Timestamp": zts, "X-Zendesk-Webhook-Signature": b64mac("sha256", sec, zts + body)},
    body, "01GW0Y7Q4M7M8T6E2ZV1Q6X9QW", want_type="zen:event-type:ticket.created",
    sig_header="X-Zendesk-Webhook-Signature", timestamped=True)

body = ('[{"eventId":1793913213,"subscriptionId":2345,"portalId":62515,"appId":54321,"occurredAt":1679479653000,'
        '"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM"}]')
sec = "hubspot-client-secret"
ms = str(T * 1000)
url = "https://hooks.example.com/hooks/hubspot"
add("hubspot", "computed: HubSpot, Validating requests, signature v3: base64 HMAC-SHA256 of method + URI + body + timestamp", sec,
    {"X-HubSpot-Request-Timestamp": ms, "X-HubSpot-Signature-v3": b64mac("sha256", sec, "POST" + url + body + ms)},
    body, "1793913213", url=url, want_type="contact.creation", sig_header="X-HubSpot-Signature-v3", timestamped=True)

# HubSpot's SDK vector: its body is not a HubSpot delivery (nor JSON), so the test checks
# that the signature is accepted and only the body then refused; the computed vector
# above checks the identity of a real-shaped batch.
add("hubspot", "documented: hubspot-api-python (official Python SDK) tests/spec/utils/test_signature.py "
    "test_get_signature__v3 (client secret, body, URL, POST, timestamp 15000000 ms)",
    "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy",
    {"X-HubSpot-Request-Timestamp": "15000000", "X-HubSpot-Signature-v3": "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw="},
    "{'example_field':'example_value'}", "", now=15000, url="https://www.example.com/webhook_uri",
    sig_header="X-HubSpot-Signature-v3", timestamped=True, signature_only=True)

# The signature object is mailgun-php's; Mailgun signs nothing else, so the event data
# around it is ours (the shape of the docs' sample).
body = ('{"signature":{"timestamp":"1403645220","token":"5egbgr1vjgqxtrnp65xfznchgdccwh5d6i09vijqi3whgowmn6",'
        '"signature":"9cfc5c41582e51246e73c88d34db3af0a3a2692a76fbab81492842f000256d33"},'
        '"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1403645220.1234}}')
add("mailgun", "documented: mailgun-php (official PHP SDK) tests/Api/WebhookTest.php testVerifyWebhookGood (signing key "
    "key-3ax6xnjp29jd6fds4gc373sgvjxteol0, timestamp, token, signature: hex HMAC-SHA256 of timestamp + token). "
    "Mailgun signs only that object, so the event-data around it is ours", "key-3ax6xnjp29jd6fds4gc373sgvjxteol0",
    {}, body, "CPgfbmQMTCKtHW6uIWtuVe", now=1403645220, want_type="delivered", sig_header="", timestamped=True,
    body_signed=False)

body = '{"RecordType":"Delivery","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","DeliveredAt":"2023-03-22T10:07:33Z","Recipient":"john@example.com"}'
add("postmark", "computed: Postmark, Webhooks overview: HTTP basic credentials set on the webhook URL; nothing "
    "is signed, so the body is not covered", "hook:s3cr3t-pa55", {"Authorization": basic("hook:s3cr3t-pa55")}, body,
    "Delivery|883953f4-6105-42a2-a16a-77a8eac79483||2023-03-22T10:07:33Z|||", want_type="Delivery",
    sig_header="Authorization", body_signed=False)

body = ('{"action":"create","type":"Issue","createdAt":"2023-03-22T10:07:33.000Z",'
        '"data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"},"webhookTimestamp":%d}' % (T * 1000))
sec = "lin_wh_signing_secret"
add("linear", "computed: Linear, Webhooks securing: Linear-Signature hex HMAC-SHA256 of the body; "
    "webhookTimestamp (ms) in the signed body", sec,
    {"Linear-Signature": hexmac("sha256", sec, body), "Linear-Delivery": "234d1a4e-b617-4388-90fe-adc3633d6b72",
     "Linear-Event": "Issue"}, body, "234d1a4e-b617-4388-90fe-adc3633d6b72", want_type="Issue.create",
    sig_header="Linear-Signature", timestamped=True)

body = '{"object_kind":"issue","event_type":"issue","object_attributes":{"id":301,"iid":23,"action":"open"}}'
add("gitlab", "computed: GitLab, Webhooks: X-Gitlab-Token carries the secret token as it is; nothing is "
    "signed, so the body is not covered", "gitlab-secret-token",
    {"X-Gitlab-Token": "gitlab-secret-token", "X-Gitlab-Event": "Issue Hook",
     "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e"}, body,
    "13792a34-cac6-4fda-95a8-c58e00a3954e", want_type="Issue Hook", sig_header="X-Gitlab-Token", body_signed=False)

# RFC 8032 section 7.1, TEST 1 key pair.
priv = Ed25519PrivateKey.from_private_bytes(bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"))
body = '{"id":"1067178433839755285","type":2,"application_id":"1067160393869353010","token":"aW50ZXJhY3Rpb24","data":{"name":"hello"}}'
add("discord", "computed: Discord, Interactions, security and authorization: hex Ed25519 signature of "
    "timestamp + body; the key pair is RFC 8032 section 7.1 TEST 1",
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    {"X-Signature-Timestamp": ts, "X-Signature-Ed25519": priv.sign((ts + body).encode()).hex()}, body,
    "1067178433839755285", want_type="2", sig_header="X-Signature-Ed25519", timestamped=True)

body = ('{"event":"meeting.started","event_ts":1679479653000,"payload":{"account_id":"D8cJuqWVQ623CI4Q8yQK0Q",'
        '"object":{"uuid":"4444AAAiAAAAAiAiAiiAii==","id":"6962400003"}}}')
sec = "zoom-secret-token"
add("zoom", "computed: Zoom, Using webhooks, verify webhook events: v0= hex HMAC-SHA256 of v0:timestamp:body", sec,
    {"X-Zm-Request-Timestamp": ts, "X-Zm-Signature": "v0=" + hexmac("sha256", sec, "v0:" + ts + ":" + body)}, body,
    "meeting.started|1679479653000|4444AAAiAAAAAiAiAiiAii==|6962400003", want_type="meeting.started",
    sig_header="X-Zm-Signature", timestamped=True)

for name in ("resend", "clerk"):
    key = base64.b64encode(b"standard-webhooks-" + name.encode()).decode()
    body = '{"type":"email.delivered","created_at":"2023-03-22T10:07:33.000Z","data":{"email_id":"4ef9a417"}}' if name == "resend" \
        else '{"type":"user.created","object":"event","data":{"id":"user_29w83sxmDNGwOuEthce5gg56FcC"}}'
    mid = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
    sig = base64.b64encode(hmac.new(base64.b64decode(key), (mid + "." + ts + "." + body).encode(), hashlib.sha256).digest()).decode()
    add(name, f"computed: {name} sends Standard Webhooks through Svix (svix-id, svix-timestamp, svix-signature: "
        "v1,base64 HMAC-SHA256 of id.timestamp.body, key = base64 after whsec_)", "whsec_" + key,
        {"svix-id": mid, "svix-timestamp": ts, "svix-signature": "v1," + sig}, body, mid,
        want_type=json.loads(body)["type"], sig_header="svix-signature", timestamped=True)

print(json.dumps(vectors, indent=1))
