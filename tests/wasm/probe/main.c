/* probe: a test tool that tries what a tool might try, and reports what happened.
 * Built by tests/wasm/conftest.py with examples/wasm/build.py. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentvisor.h"

static int64_t result_errno(const char *what, int err) {
    av_buf out = {0};
    av_puts(&out, "{\"ok\":false,\"what\":");
    av_put_str(&out, what, strlen(what));
    av_puts(&out, ",\"errno\":");
    av_put_int(&out, err);
    av_puts(&out, ",\"reason\":");
    av_put_str(&out, strerror(err), strlen(strerror(err)));
    av_puts(&out, "}");
    return av_return(&out);
}

/* {"path": P} -> {"ok": true, "text": CONTENT} */
AV_EXPORT(read) int64_t read_file(const char *args, int32_t len) {
    char *path = av_get_string(args, (size_t)len, "path", NULL);
    if (!path) return av_error("no path");
    FILE *f = fopen(path, "rb");
    if (!f) return result_errno("open", errno);
    av_buf text = {0};
    char chunk[1024];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) av_put(&text, chunk, n);
    fclose(f);
    av_buf out = {0};
    av_puts(&out, "{\"ok\":true,\"text\":");
    av_put_str(&out, text.data ? text.data : "", text.len);
    av_puts(&out, "}");
    return av_return(&out);
}

/* {"path": P, "text": T} -> {"ok": true} */
AV_EXPORT(write) int64_t write_file(const char *args, int32_t len) {
    char *path = av_get_string(args, (size_t)len, "path", NULL);
    size_t n;
    char *text = av_get_string(args, (size_t)len, "text", &n);
    if (!path || !text) return av_error("no path or text");
    FILE *f = fopen(path, "wb");
    if (!f) return result_errno("open", errno);
    size_t written = fwrite(text, 1, n, f);
    if (fclose(f) != 0 || written != n) return result_errno("write", errno);
    return av_pack("{\"ok\":true}", 11);
}

/* {"name": N} -> {"value": V or null} */
AV_EXPORT(env) int64_t env(const char *args, int32_t len) {
    char *name = av_get_string(args, (size_t)len, "name", NULL);
    if (!name) return av_error("no name");
    const char *value = getenv(name);
    av_buf out = {0};
    av_puts(&out, "{\"value\":");
    if (value) av_put_str(&out, value, strlen(value));
    else av_puts(&out, "null");
    av_puts(&out, "}");
    return av_return(&out);
}

/* The arguments are the request, the host's answer is the result. */
AV_EXPORT(http) int64_t http(const char *args, int32_t len) {
    int64_t answer = av_http_request(args, len);
    return answer ? answer : av_error("the host could not hand the answer over");
}

/* Never returns. */
AV_EXPORT(spin) int64_t spin(const char *args, int32_t len) {
    volatile unsigned long long i = (unsigned long long)len + (unsigned char)args[0];
    for (;;) i++;
}

/* Kept so the compiler cannot drop allocations nobody reads. */
char *volatile probe_last_block;

/* {"mb": N} -> allocates (and touches) up to N MiB, 1 MiB at a time. */
AV_EXPORT(grab) int64_t grab(const char *args, int32_t len) {
    long long want = av_get_int(args, (size_t)len, "mb", 0), got = 0;
    while (got < want) {
        char *block = malloc(1 << 20);
        if (!block) break;
        memset(block, 1, 1 << 20);
        probe_last_block = block;
        got++;
    }
    av_buf out = {0};
    av_puts(&out, "{\"allocated_mb\":");
    av_put_int(&out, got);
    av_puts(&out, got < want ? ",\"refused\":true}" : ",\"refused\":false}");
    return av_return(&out);
}

/* Writes a line to stderr, then traps. */
AV_EXPORT(crash) int64_t crash(const char *args, int32_t len) {
    fprintf(stderr, "probe: about to crash (%d bytes of arguments)\n", (int)len);
    fflush(stderr);
    if (args[0]) __builtin_trap();
    return 0;
}

/* Exits instead of returning. */
AV_EXPORT(quit) int64_t quit(const char *args, int32_t len) {
    exit(len > 0 && args[0] ? 3 : 4);
}

/* {"n": N} -> a result of about N bytes. */
AV_EXPORT(big) int64_t big(const char *args, int32_t len) {
    long long n = av_get_int(args, (size_t)len, "n", 0);
    av_buf out = {0};
    av_puts(&out, "{\"x\":\"");
    for (long long i = 0; i < n; i++) av_put(&out, "x", 1);
    av_puts(&out, "\"}");
    return av_return(&out);
}

/* Returns the arguments as they came. */
AV_EXPORT(echo) int64_t echo(const char *args, int32_t len) { return av_pack(args, (size_t)len); }

/* Returns a pointer outside the memory. */
AV_EXPORT(wild) int64_t wild(const char *args, int32_t len) {
    (void)args; (void)len;
    return (int64_t)(((uint64_t)0xFFFFFF00u << 32) | 200u);
}
