/* agentvisor.h: the agentvisor Wasm tool ABI for C, plus a small JSON reader and writer.
 *
 * The ABI (docs/wasm.md):
 *   - the module exports its linear memory as "memory" and `av_alloc(size) -> ptr`;
 *   - for each function in the manifest it exports `NAME(ptr, len) -> i64`: the host
 *     writes the call's arguments (a UTF-8 JSON object) at ptr, and the function returns
 *     its result, a UTF-8 JSON object, packed as (pointer << 32) | length;
 *   - a result with an "error" key is a failure the agent is told about;
 *   - the only way to the network is the host function agentvisor.http_request.
 *
 * Include this header in exactly one .c file of a tool: it defines av_alloc.
 * An instance serves one call and is then thrown away, so nothing needs freeing.
 */
#ifndef AGENTVISOR_H
#define AGENTVISOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AV_EXPORT(name) __attribute__((export_name(#name)))

/* Where the host puts a call's arguments and host-function results. NULL (0) on failure. */
AV_EXPORT(av_alloc) void *av_alloc(int32_t size) {
    return size < 0 ? NULL : malloc(size ? (size_t)size : 1);
}

/* Send one HTTP request through agentvisor's network layer. `request` is a JSON object:
 * {"method": "GET", "url": "https://...", "headers": {...}, "body": "..."}; secrets go in
 * as {{secret:NAME}} placeholders. The result is packed like a function's result and is
 * {"status": N, "headers": {...}, "body": "..."} or {"error": "...", "refused": true}.
 * 0 means the host could not hand the answer over (memory limit). */
__attribute__((import_module("agentvisor"), import_name("http_request")))
int64_t av_http_request(const char *request, int32_t len);

static inline int64_t av_pack(const char *data, size_t len) {
    return (int64_t)(((uint64_t)(uintptr_t)data << 32) | (uint32_t)len);
}
static inline const char *av_unpack_ptr(int64_t packed) {
    return (const char *)(uintptr_t)((uint64_t)packed >> 32);
}
static inline size_t av_unpack_len(int64_t packed) { return (uint32_t)packed; }

/* ---- writing JSON ------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: the result is av_oom() instead */
} av_buf;

static void av_put(av_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) { b->failed = 1; return; }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void av_puts(av_buf *b, const char *s) { av_put(b, s, strlen(s)); }

static void av_put_int(av_buf *b, long long v) {
    char tmp[24];
    int i = sizeof tmp;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--i] = '-';
    av_put(b, tmp + i, sizeof tmp - i);
}

/* A JSON string literal, quotes included. */
static void av_put_str(av_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    av_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { char e[2] = {'\\', (char)c}; av_put(b, e, 2); }
        else if (c == '\n') av_put(b, "\\n", 2);
        else if (c == '\t') av_put(b, "\\t", 2);
        else if (c == '\r') av_put(b, "\\r", 2);
        else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            av_put(b, e, 6);
        } else av_put(b, (const char *)&c, 1);
    }
    av_put(b, "\"", 1);
}

static int64_t av_oom(void) {
    static const char msg[] = "{\"error\":\"out of memory (the tool's memory limit)\"}";
    return av_pack(msg, sizeof msg - 1);
}

static int64_t av_return(av_buf *b) { return b->failed ? av_oom() : av_pack(b->data, b->len); }

/* {"error": message} */
static int64_t av_error(const char *message) {
    av_buf b = {0};
    av_puts(&b, "{\"error\":");
    av_put_str(&b, message, strlen(message));
    av_puts(&b, "}");
    return av_return(&b);
}

/* ---- reading JSON (strict RFC 8259) --------------------------------------------------- */

typedef struct {
    const char *start, *p, *end;
    const char *error; /* NULL while well-formed */
    int depth;
} av_json;

#define AV_JSON_MAX_DEPTH 128

static void av_ws(av_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int av_fail(av_json *j, const char *why) {
    if (!j->error) j->error = why;
    return 0;
}

static int av_hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return 0;
    *out = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                   : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                   : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15) return 0;
        *out = *out * 16 + d;
    }
    return 1;
}

/* Encodes a code point as UTF-8 into u; returns the number of bytes. */
static size_t av_utf8(unsigned cp, char u[4]) {
    if (cp < 0x80) { u[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 63));
        u[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 63));
    u[2] = (char)(0x80 | (cp >> 6 & 63)); u[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Reads a string at j->p (at its opening quote). With `out`, decodes it into out (NUL
 * terminated, at most cap-1 bytes; longer strings fail). Returns the decoded length + 1,
 * 0 on error. */
static size_t av_string(av_json *j, char *out, size_t cap) {
    size_t n = 0;
    if (j->p >= j->end || *j->p != '"') return av_fail(j, "expected a string");
    j->p++;
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p++;
        unsigned cp;
        if (c == '"') {
            if (out) out[n] = 0;
            return n + 1;
        }
        if (c < 0x20) { j->p--; return av_fail(j, "control character in a string"); }
        if (c != '\\') { cp = c; goto raw; }
        if (j->p >= j->end) break;
        c = (unsigned char)*j->p++;
        switch (c) {
        case '"': case '\\': case '/': cp = c; goto raw;
        case 'b': cp = '\b'; goto raw;
        case 'f': cp = '\f'; goto raw;
        case 'n': cp = '\n'; goto raw;
        case 'r': cp = '\r'; goto raw;
        case 't': cp = '\t'; goto raw;
        case 'u': {
            const char *escape = j->p - 2; /* errors point at the backslash */
            char u[4];
            size_t k;
            if (!av_hex4(j->p, j->end, &cp)) { j->p = escape; return av_fail(j, "bad \\u escape"); }
            j->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                    !av_hex4(j->p + 2, j->end, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                    j->p = escape;
                    return av_fail(j, "unpaired surrogate in a \\u escape");
                }
                j->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                j->p = escape;
                return av_fail(j, "unpaired surrogate in a \\u escape");
            }
            k = av_utf8(cp, u);
            if (out) {
                if (n + k >= cap) return av_fail(j, "string too long");
                memcpy(out + n, u, k);
            }
            n += k;
            continue;
        }
        default:
            j->p--;
            return av_fail(j, "bad escape in a string");
        }
    raw:
        if (out) {
            if (n + 1 >= cap) return av_fail(j, "string too long");
            out[n] = (char)cp;
        }
        n++;
    }
    return av_fail(j, "unterminated string");
}

static int av_value(av_json *j);

static int av_digits(av_json *j) {
    const char *s = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    return j->p > s;
}

static int av_number(av_json *j) {
    if (j->p < j->end && *j->p == '-') j->p++;
    if (j->p < j->end && *j->p == '0') j->p++;
    else if (!av_digits(j)) return av_fail(j, "bad number");
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (!av_digits(j)) return av_fail(j, "bad number: digits must follow '.'");
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (!av_digits(j)) return av_fail(j, "bad number: digits must follow the exponent");
    }
    return 1;
}

static int av_word(av_json *j, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n) != 0)
        return av_fail(j, "unexpected character");
    j->p += n;
    return 1;
}

static int av_container(av_json *j, char close) {
    if (++j->depth > AV_JSON_MAX_DEPTH) return av_fail(j, "nested too deeply");
    j->p++;
    av_ws(j);
    if (j->p < j->end && *j->p == close) { j->p++; j->depth--; return 1; }
    for (;;) {
        if (close == '}') {
            av_ws(j);
            if (!av_string(j, NULL, 0)) return av_fail(j, "expected a key string");
            av_ws(j);
            if (j->p >= j->end || *j->p != ':') return av_fail(j, "expected ':' after a key");
            j->p++;
        }
        if (!av_value(j)) return 0;
        av_ws(j);
        if (j->p < j->end && *j->p == ',') { j->p++; continue; }
        if (j->p < j->end && *j->p == close) { j->p++; j->depth--; return 1; }
        return av_fail(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* Skips one value, checking it strictly. */
static int av_value(av_json *j) {
    av_ws(j);
    if (j->p >= j->end) return av_fail(j, "unexpected end of input");
    switch (*j->p) {
    case '{': return av_container(j, '}');
    case '[': return av_container(j, ']');
    case '"': return av_string(j, NULL, 0) != 0;
    case 't': return av_word(j, "true");
    case 'f': return av_word(j, "false");
    case 'n': return av_word(j, "null");
    default:
        if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) return av_number(j);
        return av_fail(j, "unexpected character");
    }
}

/* A whole document: one value and nothing after it but whitespace. */
static int av_json_check(av_json *j) {
    if (!av_value(j)) return 0;
    av_ws(j);
    return j->p == j->end ? 1 : av_fail(j, "text after the JSON value");
}

static av_json av_json_open(const char *text, size_t len) {
    av_json j = {text, text, text + len, NULL, 0};
    return j;
}

/* Points `member` at the value of `key` in the top-level object `doc`; 0 if absent. */
static int av_get(const char *doc, size_t len, const char *key, av_json *member) {
    av_json j = av_json_open(doc, len);
    size_t keylen = strlen(key);
    av_ws(&j);
    if (j.p >= j.end || *j.p != '{') return 0;
    j.p++;
    for (;;) {
        av_ws(&j);
        const char *k = j.p + 1;
        if (!av_string(&j, NULL, 0)) return 0;
        int match = (size_t)(j.p - 1 - k) == keylen && memcmp(k, key, keylen) == 0;
        av_ws(&j);
        if (j.p >= j.end || *j.p++ != ':') return 0;
        av_ws(&j);
        if (match) { *member = j; return 1; }
        if (!av_value(&j)) return 0;
        av_ws(&j);
        if (j.p >= j.end || *j.p++ != ',') return 0;
    }
}

/* The string `key` of the top-level object, decoded into a fresh NUL-terminated buffer
 * (its length in *n when n is not NULL); NULL if absent, not a string, or out of memory. */
static char *av_get_string(const char *doc, size_t len, const char *key, size_t *n) {
    av_json j;
    if (!av_get(doc, len, key, &j)) return NULL;
    av_json probe = j;
    size_t size = av_string(&probe, NULL, 0);
    if (!size) return NULL;
    char *out = malloc(size);
    if (!out || !av_string(&j, out, size)) return NULL;
    if (n) *n = size - 1;
    return out;
}

/* The integer `key` of the top-level object, or `fallback` when absent or not a number. */
static long long av_get_int(const char *doc, size_t len, const char *key, long long fallback) {
    av_json j;
    if (!av_get(doc, len, key, &j) || j.p >= j.end) return fallback;
    int neg = *j.p == '-';
    if (neg) j.p++;
    if (j.p >= j.end || *j.p < '0' || *j.p > '9') return fallback;
    long long v = 0;
    while (j.p < j.end && *j.p >= '0' && *j.p <= '9' && v < 1000000000000LL)
        v = v * 10 + (*j.p++ - '0');
    return neg ? -v : v;
}

#endif
