/* api-client: GET a path on the GitHub REST API (or API_BASE_URL) with the operator's
 * token. The tool never holds the token: it writes the placeholder {{secret:GITHUB_TOKEN}}
 * and agentvisor's network layer puts the value in, only toward a host the secret may
 * reach, and takes it back out of the answer.
 * Capabilities: network to api.github.com, the secret GITHUB_TOKEN, the variable
 * API_BASE_URL. */
#include <stdlib.h>

#include "agentvisor.h"

AV_EXPORT(get) int64_t get(const char *args, int32_t len) {
    char *path = av_get_string(args, (size_t)len, "path", NULL);
    if (!path || path[0] != '/')
        return av_error("expected {\"path\": \"/...\"}, a path on the API such as /rate_limit");
    const char *base = getenv("API_BASE_URL");
    if (!base || !*base) base = "https://api.github.com";

    av_buf url = {0};
    av_puts(&url, base);
    av_puts(&url, path);
    av_buf req = {0};
    av_puts(&req, "{\"method\":\"GET\",\"url\":");
    av_put_str(&req, url.data ? url.data : "", url.len);
    av_puts(&req, ",\"headers\":{\"Accept\":\"application/vnd.github+json\","
                  "\"Authorization\":\"Bearer {{secret:GITHUB_TOKEN}}\"}}");
    if (url.failed || req.failed) return av_oom();

    int64_t answer = av_http_request(req.data, (int32_t)req.len);
    /* The host's answer is already the JSON object to return: status, headers, body. */
    return answer ? answer : av_oom();
}
