/* Helpers shared by the subcommands. */
#include "cli.h"

#include <ckpt/sys/common.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_fail(const char *cmd)
{
    const ckpt_error *e = ckpt_error_last();

    fprintf(stderr, "ckptconv %s: error: %s\n", cmd, e->message);
    return e->klass == CKPT_ERRCLASS_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "ckptconv %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'ckptconv %s --help'.\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_parse_size(const char *s, uint64_t *out)
{
    static const struct { const char *suffix; double mult; } units[] = {
        { "", 1 }, { "B", 1 },
        { "K", 1024.0 }, { "KIB", 1024.0 }, { "KB", 1e3 },
        { "M", 1048576.0 }, { "MIB", 1048576.0 }, { "MB", 1e6 },
        { "G", 1073741824.0 }, { "GIB", 1073741824.0 }, { "GB", 1e9 },
        { "T", 1099511627776.0 }, { "TIB", 1099511627776.0 }, { "TB", 1e12 },
    };
    char suffix[8];
    char *end;
    double v;
    size_t i, n;

    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno || !(v >= 0) || isinf(v))
        return -1;
    while (*end == ' ')
        end++;
    n = strlen(end);
    if (n >= sizeof suffix)
        return -1;
    for (i = 0; i < n; i++)
        suffix[i] = (char)toupper((unsigned char)end[i]);
    suffix[n] = '\0';
    for (i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(suffix, units[i].suffix) == 0) {
            double bytes = v * units[i].mult;
            if (bytes >= 18446744073709551615.0)
                return -1;
            *out = (uint64_t)bytes;
            return 0;
        }
    }
    return -1;
}

const char *cli_human_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.1f %s", v, names[u]);
    return buf;
}

static int progress_shown;

void cli_progress(uint64_t done, uint64_t total, void *payload)
{
    const char *label = payload;
    int width = 30, filled;
    double frac;
    char bar[64];

    if (!isatty(STDERR_FILENO) || !total)
        return;
    frac = (double)done / (double)total;
    filled = (int)(frac * width);
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(width - filled));
    bar[width] = '\0';
    fprintf(stderr, "\r%s [%s] %5.1f%%", label ? label : "", bar, frac * 100.0);
    fflush(stderr);
    progress_shown = 1;
}

void cli_progress_done(void)
{
    if (progress_shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
        progress_shown = 0;
    }
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_option_memory(const char *cmd, const char *arg, uint64_t *out)
{
    if (cli_parse_size(arg, out) < 0 || *out < (16u << 20))
        return cli_usage_error(cmd, "--memory %s: expected a size of at least 16M, e.g. 512M or 2G", arg);
    return 0;
}

int cli_parse_int_prefix(const char *s, long long min, long long max, long long *out, const char **end)
{
    long long v = 0;
    const char *p;
    int in_range = 1;

    for (p = s; *p >= '0' && *p <= '9'; p++) {
        int digit = *p - '0';
        /* past max, keep reading the digits, so that the caller's end is past all of them */
        if (!in_range || v > (max - digit) / 10)
            in_range = 0;
        else
            v = v * 10 + digit;
    }
    *end = p;
    if (p == s || !in_range || v < min)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_int(const char *s, long long min, long long max, long long *out)
{
    const char *end;
    long long v;

    if (cli_parse_int_prefix(s, min, max, &v, &end) < 0 || *end)
        return -1;
    *out = v;
    return 0;
}

int cli_option_int(const char *cmd, const char *opt, const char *arg, long long min, long long max, long long *out)
{
    if (cli_parse_int(arg, min, max, out) < 0)
        return cli_usage_error(cmd, "%s %s: expected an integer from %lld to %lld", opt, arg, min, max);
    return 0;
}

int cli_option_parallel(const char *cmd, const char *opt, const char *arg, int *out)
{
    long long v = 0;
    int rc = cli_option_int(cmd, opt, arg, 1, CLI_MAX_PARALLEL, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

int cli_option_threads(const char *cmd, const char *arg, int *out)
{
    long long v = 0;
    int rc = cli_option_int(cmd, "--threads", arg, 1, 1024, &v);

    if (rc == 0)
        *out = (int)v;
    return rc;
}

static int parse_level(const char *arg, int *out)
{
    long long v;

    if (cli_parse_int(arg, 1, 22, &v) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

int cli_option_compress(const char *cmd, const char *arg, ckpt_convert_options *o)
{
    size_t n = strcspn(arg, ":");

    if (n == 4 && strncmp(arg, "zstd", 4) == 0)
        o->compress = CKPT_CODEC_ZSTD;
    else if (n == 4 && strncmp(arg, "gzip", 4) == 0)
        o->compress = CKPT_CODEC_GZIP;
    else if (strcmp(arg, "none") == 0)
        o->compress = CKPT_CODEC_NONE;
    else
        return cli_usage_error(cmd, "--compress %s: expected zstd[:LEVEL], gzip[:LEVEL] or none", arg);
    if (arg[n] && (parse_level(arg + n + 1, &o->compress_level) < 0 ||
                   (o->compress == CKPT_CODEC_GZIP && o->compress_level > 9)))
        return cli_usage_error(cmd, "--compress %s: the level is 1 to 22 for zstd, 1 to 9 for gzip", arg);
    return 0;
}

int cli_option_compress_level(const char *cmd, const char *arg, ckpt_convert_options *o)
{
    if (parse_level(arg, &o->compress_level) < 0)
        return cli_usage_error(cmd, "--compress-level %s: expected 1 to 22 (zstd) or 1 to 9 (gzip)", arg);
    return 0;
}

