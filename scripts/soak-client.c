/* A compiled stand-in ACP client for scripts/bench-soak.sh: answers initialize, session/new
 * and session/prompt (ids 1, 2, 3, as the executor numbers them), then reads its stdin until
 * the executor stops it or closes it. */
#include <stdio.h>
#include <string.h>

int main(void) {
    static const char *answers[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s1\"}}\n",
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"stopReason\":\"end_turn\"}}\n",
    };
    static char line[1 << 16];
    for (int i = 0; i < 3 && fgets(line, sizeof line, stdin); i++) {
        fputs(answers[i], stdout);
        fflush(stdout);
    }
    while (fgets(line, sizeof line, stdin)) {
    }
    return 0;
}
