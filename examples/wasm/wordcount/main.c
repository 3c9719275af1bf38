/* wordcount: lines, words and bytes of a text file in the workspace (like `wc`).
 * Capability: read access to the workspace, which the host shows it at /workspace. */
#include <stdio.h>

#include "agentvisor.h"

AV_EXPORT(count) int64_t count(const char *args, int32_t len) {
    char *path = av_get_string(args, (size_t)len, "path", NULL);
    if (!path) return av_error("expected {\"path\": \"FILE\"}, a path relative to the workspace");

    av_buf full = {0};
    av_puts(&full, "/workspace/");
    av_puts(&full, path[0] == '/' ? path + 1 : path);
    if (full.failed) return av_oom();
    FILE *f = fopen(full.data, "rb");
    if (!f) {
        av_buf msg = {0};
        av_puts(&msg, "cannot open ");
        av_puts(&msg, path);
        av_puts(&msg, " (outside the workspace, or missing)");
        return msg.failed ? av_oom() : av_error(msg.data);
    }
    long long lines = 0, words = 0, bytes = 0;
    int in_word = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        bytes += (long long)n;
        for (size_t i = 0; i < n; i++) {
            char c = chunk[i];
            int space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
            if (c == '\n') lines++;
            if (!space && !in_word) words++;
            in_word = !space;
        }
    }
    fclose(f);

    av_buf out = {0};
    av_puts(&out, "{\"path\":");
    av_put_str(&out, path, strlen(path));
    av_puts(&out, ",\"lines\":");
    av_put_int(&out, lines);
    av_puts(&out, ",\"words\":");
    av_put_int(&out, words);
    av_puts(&out, ",\"bytes\":");
    av_put_int(&out, bytes);
    av_puts(&out, "}");
    return av_return(&out);
}
