/* jsonlint: checks that a text is well-formed JSON (RFC 8259, strict) and says where not.
 * No capabilities: it sees no files, no environment and no network. */
#include "agentvisor.h"

AV_EXPORT(validate) int64_t validate(const char *args, int32_t len) {
    size_t n;
    char *text = av_get_string(args, (size_t)len, "text", &n);
    if (!text) return av_error("expected {\"text\": \"...\"}");

    av_json j = av_json_open(text, n);
    av_buf out = {0};
    if (av_json_check(&j)) {
        av_puts(&out, "{\"valid\":true}");
        return av_return(&out);
    }
    long long line = 1, column = 1;
    for (const char *p = text; p < j.p; p++) {
        if (*p == '\n') { line++; column = 1; }
        else if ((*p & 0xC0) != 0x80) column++; /* count characters, not UTF-8 bytes */
    }
    av_puts(&out, "{\"valid\":false,\"problem\":");
    av_put_str(&out, j.error, strlen(j.error));
    av_puts(&out, ",\"line\":");
    av_put_int(&out, line);
    av_puts(&out, ",\"column\":");
    av_put_int(&out, column);
    av_puts(&out, "}");
    return av_return(&out);
}
