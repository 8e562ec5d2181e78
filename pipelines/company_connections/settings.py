"""Constants of the service client: endpoint paths, header names and defaults.

Paths are format strings relative to ``base_url``; the client URL-quotes every
substituted identifier before formatting. Nothing here reads the environment.
"""

from __future__ import annotations

# Endpoints (numbers as in the service specification).
LOGIN_PATH = "/api/auth"  # 1  POST, Basic auth
RENEW_TOKEN_PATH = "/api/auth/token"  # 2  GET, Bearer (current token)
USER_INFO_PATH = "/api/auth/user-info"  # 3
COMPANY_PATH = "/api/companies/{company_id}"  # 4
CONNECTIONS_PATH = "/api/companies/connections"  # 5  (list)
CONNECTION_PATH = "/api/companies/connections/{company_id}"  # 6
QUESTIONNAIRE_PATH = "/api/companies/{company_id}/type/{company_type_id}/questionnaires"  # 7
TEMPLATE_PATH = "/api/company-type/{company_type_id}/questionnaires"  # 8
DOCUMENTS_PATH = "/api/companies/{company_id}/company-types/{company_type_id}/documents"  # 10 (list)
DOCUMENT_URL_PATH = "/api/documents/{document_id}/url"  # 11

# Headers.
AUTHORIZATION_HEADER = "Authorization"
NAMESPACE_HEADER = "x-namespace"
NAMESPACE_VALUE = "/api/company/{company_id}"
RETRY_AFTER_HEADER = "Retry-After"
ACCEPT_HEADER = "Accept"
USER_AGENT = "diligence-warehouse/0.1"

# Keys accepted in a login or renewal response body, in order of preference.
TOKEN_KEYS = ("token", "accessToken", "access_token", "jwt")

# Keys of a paged object body: where the items are, and where the next link is.
PAGE_ITEM_KEYS = ("items", "data", "results")
PAGE_NEXT_KEYS = ("next", "nextPage")
MAX_PAGES = 1000

# Concurrency, rate and retry defaults.
DEFAULT_MAX_CONCURRENCY = 16
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_MAX_ATTEMPTS = 6
DEFAULT_BACKOFF_INITIAL = 0.25
DEFAULT_BACKOFF_MAX = 30.0
DEFAULT_COOLDOWN_WITHOUT_RETRY_AFTER = 1.0  # a 429 without Retry-After pauses everyone this long
# A Retry-After longer than this (seconds) fails the request at once with one clear
# line instead of waiting (setting `max_retry_after`).
DEFAULT_MAX_RETRY_AFTER = 120.0
# A namespace with no completed request for this long (seconds) fails, naming what it
# waited for (setting `stall_timeout`).
DEFAULT_STALL_TIMEOUT = 120.0
# An interrupted sync's manifest (its evidence) younger than this (seconds) is resumed by the
# next sync of the same namespace (setting `resume_within`; 0 never resumes).
DEFAULT_RESUME_WITHIN = 24 * 3600.0
RETRYABLE_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504})
RETRY_AFTER_STATUS_CODES = frozenset({429, 503})

# Adaptive rate after a 429 (see limits.AdaptiveThrottle).
RATE_DECREASE_FACTOR = 0.9  # new rate = accepted requests over the last second x this
RATE_HOLD_FRACTION = 0.97  # fast growth stops at this fraction of the observed ceiling
RATE_FAST_GROWTH = 0.05  # per clean second, below the hold level
RATE_PROBE_GROWTH = 0.01  # first clean second above the hold level; doubles each second
RATE_MAX_GROWTH = 0.25  # growth per clean second never exceeds this
RATE_PROBE_AFTER_SECONDS = 20  # clean seconds at the hold level before probing upwards
RATE_TENTATIVE_HOLD = 0  # the same, for a ceiling measured over less than 1 s of traffic
RATE_FORGET_CEILING_FACTOR = 1.1  # above ceiling x this without a 429, the ceiling is stale
RATE_MIN_SAMPLE = 5  # accepted requests in the last second needed to estimate a rate
RATE_MIN = 0.5  # requests per second; the adaptive rate never drops below this
RATE_BURST_SECONDS = 0.05  # the limiter's bucket holds this many seconds' worth (at least 1)
# Telling "we go too fast" from "the service sheds load" (see limits.AdaptiveThrottle).
VERIFY_MIN_RESPONSES = 30  # responses to requests sent after a cut before judging it
VERIFY_MIN_SECONDS = 1.0  # ... over at least this long after the gate reopened
VERIFY_EVIDENCE = 3  # ... and until this many 429s came, or would have at the share before
VERIFY_MAX_SECONDS = 5.0  # ... or this long
RATE_MIN_WINDOW = 0.5  # seconds: the shortest traffic an accepted rate is estimated over
VERIFY_FALL = 0.5  # the cut helped if the 429 share fell below this fraction of before
SHED_MAX_SHARE = 0.5  # a 429 share this high after a cut is a refusal, never "shedding"
SHARE_WINDOW_SECONDS = 2.0  # the 429 share compared with the tolerated share
SHARE_MARGIN = 0.02  # ... plus 3 standard errors and this margin
TOLERANCE_MEMORY_SECONDS = 60.0  # a tolerated share is forgotten after this long without 429

# Authentication.
DEFAULT_RENEW_MARGIN_SECONDS = 3600.0
DEFAULT_TOKEN_LIFETIME_SECONDS = 7 * 24 * 3600.0  # used when a token carries no `exp`
RENEW_MARGIN_FRACTION = 0.25  # margin never exceeds this fraction of the token's lifetime
RENEW_RETRY_SECONDS = 60.0  # after a failed (non-401) renewal, keep the token this long
MAX_STALE_TOKEN_RETRIES = 3  # 401s answered by retrying with an already replaced token
# A 401 on a token obtained after the request's previous 401 is a new revocation (a
# token storm), answered by logging in again; this bounds the re-logins of one client
# (one run). Exhausting it fails with AuthenticationError.
DEFAULT_RELOGIN_BUDGET = 1000
# One request gives up after this many 401s on tokens the service never took (a service
# that rejects even fresh tokens for it), or after this many 401s in all (a loop guard:
# in a token storm a request may meet several revocations in a row).
MAX_RELOGINS_PER_REQUEST = 5
MAX_UNAUTHORIZED_PER_REQUEST = 32
DEFAULT_TOKEN_FILE = "data/.access_token"

# Error messages are trimmed to this many characters of response text.
MESSAGE_MAX_CHARS = 300

# Downloads.
# Compressed bodies are inflated at most this many bytes at a time (see inflate.py).
DECODE_CHUNK_SIZE = 64 * 1024

# Size caps: an answer larger than this is refused (not retried) instead of being
# held in memory; document downloads have their own, larger cap.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_DOWNLOAD_BYTES = 2 * 1024 * 1024 * 1024
# JSON nested deeper than this is refused (the service's bodies are at most ~6 deep).
MAX_JSON_DEPTH = 64

# The client raises the GC's generation-0 threshold to this while it is open (and freezes
# the heap it found): medium at 40 ms, 12.10 s against 12.74 s without, 2026-11-26.
GC_GEN0_THRESHOLD = 20_000
