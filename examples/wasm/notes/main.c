/* notes: append a line to a Markdown note in the workspace's notes/ directory.
 * Capability: write access to notes/ (and nothing else of the workspace). */
#include <stdio.h>

#include "agentvisor.h"

static int valid_name(const char *name) {
    if (!*name || strlen(name) > 64) return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

AV_EXPORT(append) int64_t append(const char *args, int32_t len) {
    char *name = av_get_string(args, (size_t)len, "name", NULL);
    size_t n;
    char *text = av_get_string(args, (size_t)len, "text", &n);
    if (!name || !text) return av_error("expected {\"name\": \"NOTE\", \"text\": \"...\"}");
    if (!valid_name(name)) return av_error("a note name is 1-64 letters, digits, - or _");

    av_buf file = {0};
    av_puts(&file, "/workspace/notes/");
    av_puts(&file, name);
    av_puts(&file, ".md");
    if (file.failed) return av_oom();
    FILE *f = fopen(file.data, "a");
    if (!f) return av_error("cannot open the note for writing");
    size_t written = fwrite(text, 1, n, f);
    if (written == n && (n == 0 || text[n - 1] != '\n')) written += fwrite("\n", 1, 1, f);
    if (fclose(f) != 0 || written < n) return av_error("writing the note failed");

    av_buf out = {0};
    av_puts(&out, "{\"note\":");
    av_put_str(&out, file.data + strlen("/workspace/"), file.len - strlen("/workspace/"));
    av_puts(&out, ",\"appended_bytes\":");
    av_put_int(&out, (long long)written);
    av_puts(&out, "}");
    return av_return(&out);
}
