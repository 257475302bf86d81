# ruff: noqa: E501  (C text held in strings: its lines are C's)
"""The programs shipped beside the step to time it where it runs and to count its work:
`tf_timing.c` (the timing harness), `tf_count.cpp` (floating-point operations per step) and
`tf_memcount.c` (memory accesses per step). docs/codegen.md, "Timing the step where it runs".

tf_timing -- the deployed step timed in its own process, built with the deployment flags:
  tf_timing [--samples N] [--warmup N] [--cpu K] [--realtime PRIO] [--duty D] [--inputs N]
            [--seed S] [--no-ftz] --out FILE
  pins itself to CPU K (sched_setaffinity), asks for SCHED_FIFO at PRIO and mlockall(MCL_CURRENT
  | MCL_FUTURE) (each recorded as granted or refused with the OS's reason, never fatal), sets
  flush-to-zero (x86 MXCSR FTZ/DAZ, ARM64 FPCR.FZ) as the Python campaign does, draws N distinct
  inputs uniformly from the declared domain (splitmix64, seed S; token ids uniform in [0, V)),
  warms up, then times every tf_step alone with clock_gettime(CLOCK_MONOTONIC_RAW) -- nothing
  else in the timed region -- sleeping after each 1000 samples to keep a SCHED_FIFO thread under
  the kernel's RT throttling (duty D, as certify/measurement.py). A static cache is reset
  (untimed) at max_len, a ring cache slides forever. Writes FILE: N int64 durations (ns) then N
  int64 positions (steps since the last reset), native byte order; prints one JSON object (the
  run's record: isolation, clock, inputs, compiler, artifact id). `--peak` instead measures the
  machine model of the static bound: peak float throughput (independent multiply-add chains,
  no FMA, as the step is built) and read bandwidth over a buffer of the step's working-set size
  and over 64 MiB, best of 15 passes each.
  POSIX + Linux (sched_setaffinity, SCHED_FIFO, mlockall, CLOCK_MONOTONIC_RAW); builds for
  x86-64 and ARM64 with any C99 compiler that has them (`make timing`, cross-compilation:
  `make timing CC=aarch64-linux-gnu-gcc ARCH=-mcpu=native`).

tf_count -- the exact count of floating-point operations of one tf_step, from the code: the
  generated tf_model.c compiled as C++ with `float` replaced by a type whose operators count
  (add/sub, mul, div, sqrt, compare, negate). Conversions and bit selections are not counted.
tf_memcount -- the exact count of the memory accesses of one tf_step in the source: tf_model.c
  built at -O0 (every lvalue the code reads or writes is a load or store; locals go to the
  stack) with `const` defined away (GCC does not instrument read-only data) and
  -fsanitize=thread, whose instrumentation calls __tsan_readN / __tsan_writeN at every access;
  our own stubs (no TSan runtime) count them by region (weights and tables, the state, inputs
  and outputs, the stack) and the distinct bytes each touches.

Not real-time code (text generation).
"""

from __future__ import annotations

TIMING_C = r"""/* tf_timing.c -- the generated step timed in its own process (generated; do not edit).
   Usage: tf_timing [--samples N] [--warmup N] [--cpu K] [--realtime PRIO] [--duty D]
                    [--inputs N] [--seed S] [--no-ftz] --out FILE     (or --peak)
   Build: make timing (the Makefile's flags: the deployment build). docs/codegen.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "tf_model.h"

#define TF_MAX_INPUTS 4096
#define TF_CHUNK 1000

static tf_state state;
static tf_input inputs[TF_MAX_INPUTS][TF_BATCH * TF_D_IN];
static float y[TF_BATCH * TF_D_OUT];

static uint64_t rng_state;
static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            putchar('\\');
        }
        putchar((unsigned char)*s >= 32 ? *s : ' ');
    }
    putchar('"');
}

static void grant(const char *key, int requested, int granted, const char *detail, int last)
{
    printf("    \"%s\": {\"requested\": %s, \"granted\": %s, \"detail\": ", key, requested ? "true" : "false",
           granted ? "true" : "false");
    json_string(detail);
    printf("}%s\n", last ? "" : ",");
}

static int set_ftz(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040u); /* FTZ (bit 15) and DAZ (bit 6) */
    return 1;
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr |= (uint64_t)1 << 24; /* FZ */
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
    return 1;
#else
    return 0;
#endif
}

static void draw_inputs(int n)
{
    int k, i;
    for (k = 0; k < n; k++) {
        for (i = 0; i < TF_BATCH * TF_D_IN; i++) {
#if TF_TOKENS
            inputs[k][i] = (tf_input)(splitmix64() % (uint64_t)TF_D_OUT);
#else
            const double u = (double)(splitmix64() >> 11) * 0x1p-53; /* uniform in [0, 1) */
            const double lo = (double)TF_INPUT_LO(i), hi = (double)TF_INPUT_HI(i); /* its column's */
            float v = (float)(lo + (hi - lo) * u);
            v = v < TF_INPUT_LO(i) ? TF_INPUT_LO(i) : (v > TF_INPUT_HI(i) ? TF_INPUT_HI(i) : v);
            inputs[k][i] = v;
#endif
        }
    }
}

/* ---- the machine model of the static bound (--peak) ---- */
#define TF_PEAK_LANES 128 /* independent chains: 8 AVX-512 or 16 AVX2 vectors, kept in registers */
static volatile float peak_sink;

static double peak_flops(void)
{
    const float m = 0.999999f, c = 1e-6f;
    double best = 0.0;
    int pass, r, i;
    for (pass = 0; pass < 15; pass++) {
        float acc[TF_PEAK_LANES];
        const int reps = 200000;
        int64_t t0;
        for (i = 0; i < TF_PEAK_LANES; i++) {
            acc[i] = (float)i;
        }
        t0 = now_ns();
        for (r = 0; r < reps; r++) {
            for (i = 0; i < TF_PEAK_LANES; i++) {
                acc[i] = acc[i] * m + c; /* 2 flops, no FMA (-ffp-contract=off) */
            }
        }
        {
            const double s = (double)(now_ns() - t0) * 1e-9;
            const double rate = 2.0 * TF_PEAK_LANES * (double)reps / s;
            best = rate > best ? rate : best;
        }
        for (i = 0; i < TF_PEAK_LANES; i++) {
            peak_sink += acc[i];
        }
    }
    return best;
}

static double peak_read_bw(size_t bytes)
{
    const size_t n = bytes / sizeof(float) / 64 * 64;
    float *buf = (float *)malloc(n * sizeof(float));
    float acc[64];
    double best = 0.0, sink = 0.0;
    size_t i;
    int pass, k, reps, r;
    if (buf == NULL) {
        return 0.0;
    }
    for (i = 0; i < n; i++) {
        buf[i] = (float)(i & 1023) * 1e-3f;
    }
    reps = (int)(200000000ull / (n * sizeof(float) + 1)) + 1;
    for (pass = 0; pass < 15; pass++) {
        const int64_t t0 = now_ns();
        for (r = 0; r < reps; r++) {
            for (k = 0; k < 64; k++) {
                acc[k] = 0.0f;
            }
            for (i = 0; i < n; i += 64) {
                for (k = 0; k < 64; k++) {
                    acc[k] = acc[k] + buf[i + k];
                }
            }
            for (k = 0; k < 64; k++) {
                sink += acc[k];
            }
        }
        {
            const double s = (double)(now_ns() - t0) * 1e-9;
            const double rate = (double)(n * sizeof(float)) * reps / s;
            best = rate > best ? rate : best;
        }
    }
    free(buf);
    return sink == 12345.678 ? 0.0 : best; /* keeps the sums alive */
}

static int run_peak(long working_set)
{
    const double flops = peak_flops();
    const double bw_ws = peak_read_bw((size_t)working_set);
    const double bw_big = peak_read_bw((size_t)64 << 20);
    printf("{\n  \"peak_flops_per_s\": %.6e,\n  \"flop_kernel\": \"%d independent chains of a*m + c, 2 flops per element, no FMA\",\n",
           flops, TF_PEAK_LANES);
    printf("  \"read_bw_working_set_bytes_per_s\": %.6e,\n  \"working_set_bytes\": %ld,\n", bw_ws, working_set);
    printf("  \"read_bw_64mib_bytes_per_s\": %.6e,\n  \"passes\": 15\n}\n", bw_big);
    return 0;
}

int main(int argc, char **argv)
{
    long samples = 100000, warmup = 2000, n_inputs = 64, prio = 0, working_set = 0;
    int cpu = -1, ftz = 1, peak = 0;
    double duty = 0.9;
    unsigned long long seed = 0;
    const char *out = NULL;
    char aff[256] = "not requested", fifo[256] = "not requested (--realtime)", mlk[256] = "not requested (--realtime)";
    int aff_ok = 0, fifo_ok = 0, mlk_ok = 0, ftz_ok = 0;
    int64_t *dur, *pos, overhead = INT64_MAX, t0, t1, chunk_start;
    long i, k, abs_pos = 0, errors = 0;
    struct timespec res;
    FILE *f;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-ftz")) {
            ftz = 0;
            continue;
        }
        if (!strcmp(a, "--peak")) {
            peak = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "tf_timing: %s needs a value (usage: see the top of tf_timing.c)\n", a);
            return 2;
        }
        if (!strcmp(a, "--samples")) samples = atol(v);
        else if (!strcmp(a, "--warmup")) warmup = atol(v);
        else if (!strcmp(a, "--cpu")) cpu = atoi(v);
        else if (!strcmp(a, "--realtime")) prio = atol(v);
        else if (!strcmp(a, "--duty")) duty = atof(v);
        else if (!strcmp(a, "--inputs")) n_inputs = atol(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--working-set")) working_set = atol(v);
        else {
            fprintf(stderr, "tf_timing: unknown option %s (usage: see the top of tf_timing.c)\n", a);
            return 2;
        }
        i++;
    }
    if (peak) {
        return run_peak(working_set > 0 ? working_set : (long)sizeof(tf_state));
    }
    if (out == NULL || samples < 1 || warmup < 0 || n_inputs < 1 || n_inputs > TF_MAX_INPUTS || !(duty > 0.0 && duty <= 1.0)) {
        fprintf(stderr, "tf_timing: need --out FILE, --samples >= 1, --inputs in 1..%d, --duty in (0, 1]\n", TF_MAX_INPUTS);
        return 2;
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        aff_ok = sched_setaffinity(0, sizeof(set), &set) == 0;
        snprintf(aff, sizeof(aff), aff_ok ? "pinned to CPU %d" : "pin to CPU %d refused: %s", cpu, strerror(errno));
    }
    if (prio > 0) {
        struct sched_param p;
        memset(&p, 0, sizeof(p));
        p.sched_priority = (int)prio;
        fifo_ok = sched_setscheduler(0, SCHED_FIFO, &p) == 0;
        snprintf(fifo, sizeof(fifo), fifo_ok ? "SCHED_FIFO priority %ld" : "SCHED_FIFO priority %ld refused: %s (needs CAP_SYS_NICE or RLIMIT_RTPRIO)",
                 prio, strerror(errno));
        mlk_ok = mlockall(MCL_CURRENT | MCL_FUTURE) == 0;
        snprintf(mlk, sizeof(mlk), mlk_ok ? "mlockall(MCL_CURRENT | MCL_FUTURE)" : "mlockall refused: %s (raise RLIMIT_MEMLOCK or CAP_IPC_LOCK)",
                 strerror(errno));
    }
    if (ftz) {
        ftz_ok = set_ftz();
    }
    dur = (int64_t *)calloc((size_t)samples, sizeof(int64_t));
    pos = (int64_t *)calloc((size_t)samples, sizeof(int64_t));
    if (dur == NULL || pos == NULL) {
        fprintf(stderr, "tf_timing: cannot allocate %ld samples\n", samples);
        return 2;
    }
    memset(dur, 0, (size_t)samples * sizeof(int64_t)); /* touch every page before the loop */
    memset(pos, 0, (size_t)samples * sizeof(int64_t));
    rng_state = seed;
    draw_inputs((int)n_inputs);
    for (i = 0; i < 2000; i++) { /* the clock's own cost: the floor of every sample */
        t0 = now_ns();
        t1 = now_ns();
        overhead = t1 - t0 < overhead ? t1 - t0 : overhead;
    }
    tf_reset(&state);
    for (i = 0; i < warmup; i++) {
        if (!TF_RING && !TF_SSM && state.pos >= TF_MAX_LEN) {
            tf_reset(&state);
        }
        (void)tf_step(&state, inputs[i % n_inputs], y);
    }
    tf_reset(&state);
    k = 0;
    chunk_start = now_ns();
    for (i = 0; i < samples; i++) {
        int status;
        if (!TF_RING && abs_pos >= TF_MAX_LEN) { /* untimed: a new sequence (ssm: as the Session does) */
            tf_reset(&state);
            abs_pos = 0;
        }
        t0 = now_ns();
        status = tf_step(&state, inputs[k], y);
        t1 = now_ns();
        dur[i] = t1 - t0;
        pos[i] = abs_pos;
        errors += status != TF_OK;
        abs_pos++;
        k = k + 1 == n_inputs ? 0 : k + 1;
        if ((i + 1) % TF_CHUNK == 0 && fifo_ok && duty < 1.0) {
            const int64_t busy = now_ns() - chunk_start;
            const int64_t rest = (int64_t)((double)busy * (1.0 - duty) / duty);
            struct timespec nap;
            nap.tv_sec = (time_t)(rest / 1000000000ll);
            nap.tv_nsec = (long)(rest % 1000000000ll);
            nanosleep(&nap, NULL);
            chunk_start = now_ns();
        }
    }
    f = fopen(out, "wb");
    if (f == NULL || fwrite(dur, sizeof(int64_t), (size_t)samples, f) != (size_t)samples ||
        fwrite(pos, sizeof(int64_t), (size_t)samples, f) != (size_t)samples || fclose(f) != 0) {
        fprintf(stderr, "tf_timing: cannot write %s: %s\n", out, strerror(errno));
        return 2;
    }
    clock_getres(CLOCK_MONOTONIC_RAW, &res);
    printf("{\n  \"artifact_id\": \"%s\",\n  \"samples\": %ld,\n  \"warmup\": %ld,\n  \"refused_steps\": %ld,\n",
           tf_artifact_sha256(), samples, warmup, errors);
    printf("  \"clock\": {\"name\": \"clock_gettime(CLOCK_MONOTONIC_RAW)\", \"resolution_ns\": %ld, \"overhead_ns\": %lld},\n",
           (long)res.tv_nsec, (long long)overhead);
    printf("  \"inputs\": {\"distinct\": %ld, \"seed\": %llu, \"generator\": \"splitmix64\", \"order\": \"drawn once, cycled\"},\n",
           n_inputs, seed);
    printf("  \"duty_cycle\": %s,\n", fifo_ok && duty < 1.0 ? "0.9" : "null");
    printf("  \"isolation\": {\n");
    grant("flush_to_zero", ftz, ftz_ok, ftz_ok ? "FTZ/DAZ (x86 MXCSR) or FZ (ARM64 FPCR) in the timing process" : "not set", 0);
    grant("cpu_affinity", cpu >= 0, aff_ok, aff, 0);
    grant("sched_fifo", prio > 0, fifo_ok, fifo, 0);
    grant("mlockall", prio > 0, mlk_ok, mlk, 1);
    printf("  },\n  \"compiler\": ");
#if defined(__VERSION__)
    json_string(__VERSION__);
#else
    json_string("unknown: the compiler defines no __VERSION__");
#endif
    printf(",\n  \"target\": \"%s\"\n}\n",
#if defined(__x86_64__)
           "x86_64"
#elif defined(__aarch64__)
           "aarch64"
#else
           "other"
#endif
    );
    return errors ? 1 : 0;
}
"""

COUNT_CPP = r"""// tf_count.cpp -- floating-point operations of one tf_step, counted from the code (generated).
// The generated tf_model.c compiled as C++ with `float` a type whose operators count. Build and
// run: make count. Prints one JSON object.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tfc {
unsigned long long add, mul, div, sqrt, cmp, neg;
}
struct tf_cf {
    float v;
    tf_cf() = default;
    template <typename T>
    constexpr tf_cf(T x) : v((float)x) {}
    explicit operator float() const { return v; }
};
static inline tf_cf tf_mk(float x) { tf_cf r; r.v = x; return r; }
inline tf_cf operator+(tf_cf a, tf_cf b) { tfc::add++; return tf_mk(a.v + b.v); }
inline tf_cf operator-(tf_cf a, tf_cf b) { tfc::add++; return tf_mk(a.v - b.v); }
inline tf_cf operator*(tf_cf a, tf_cf b) { tfc::mul++; return tf_mk(a.v * b.v); }
inline tf_cf operator/(tf_cf a, tf_cf b) { tfc::div++; return tf_mk(a.v / b.v); }
inline tf_cf operator-(tf_cf a) { tfc::neg++; return tf_mk(-a.v); }
inline bool operator<(tf_cf a, tf_cf b) { tfc::cmp++; return a.v < b.v; }
inline bool operator>(tf_cf a, tf_cf b) { tfc::cmp++; return a.v > b.v; }
inline bool operator<=(tf_cf a, tf_cf b) { tfc::cmp++; return a.v <= b.v; }
inline bool operator>=(tf_cf a, tf_cf b) { tfc::cmp++; return a.v >= b.v; }
inline bool operator==(tf_cf a, tf_cf b) { tfc::cmp++; return a.v == b.v; }
inline bool operator!=(tf_cf a, tf_cf b) { tfc::cmp++; return a.v != b.v; }
inline tf_cf sqrtf(tf_cf a) { tfc::sqrt++; return tf_mk(std::sqrt(a.v)); }
#define float tf_cf
#define restrict __restrict
#include "tf_model.c"
#undef float

static tf_state state;
static tf_input x[TF_BATCH * TF_D_IN];
static tf_cf y[TF_BATCH * TF_D_OUT];

int main()
{
    unsigned long long seen[6] = {0, 0, 0, 0, 0, 0}, negate_max = 0;
    int t, varies = 0, refused = 0;
    uint64_t r = 12345;
    tf_reset(&state);
    for (t = 0; t < 3 * TF_MAX_LEN + 2; t++) { // every position of a sequence, and past the ring's wrap
        int i;
        if (!TF_RING && !TF_SSM && state.pos >= TF_MAX_LEN) {
            tf_reset(&state);
        }
        for (i = 0; i < TF_BATCH * TF_D_IN; i++) { // inputs inside the declared domain
            r = r * 6364136223846793005ull + 1442695040888963407ull;
#if TF_TOKENS
            x[i] = (tf_input)((r >> 33) % (uint64_t)TF_D_OUT);
#else
            {
                const double u = (double)(r >> 11) * 0x1p-53;
                const double lo = (double)TF_INPUT_LO(i), hi = (double)TF_INPUT_HI(i); // its column's
                const double v = lo + (hi - lo) * u;
                x[i] = tf_cf(v < lo ? lo : (v > hi ? hi : v));
            }
#endif
        }
        tfc::add = tfc::mul = tfc::div = tfc::sqrt = tfc::cmp = tfc::neg = 0;
        refused += tf_step(&state, x, y) != TF_OK;
        {
            const unsigned long long now[6] = {tfc::add, tfc::mul, tfc::div, tfc::sqrt, tfc::cmp, tfc::neg};
            if (t > 0 && std::memcmp(now, seen, 5 * sizeof(now[0])) != 0) { // every count but negate
                varies++;
            }
            std::memcpy(seen, now, sizeof(now));
            negate_max = now[5] > negate_max ? now[5] : negate_max; // |y| in the output check: data-dependent
        }
    }
    std::printf("{\"add_sub\": %llu, \"mul\": %llu, \"div\": %llu, \"sqrt\": %llu, \"compare\": %llu, \"negate_max\": %llu, "
                "\"steps\": %d, \"steps_whose_count_differs\": %d, \"refused_steps\": %d}\n",
                seen[0], seen[1], seen[2], seen[3], seen[4], negate_max, t, varies, refused);
    return varies || refused ? 1 : 0;
}
"""

MEMCOUNT_C = r"""/* tf_memcount.c -- memory accesses of one tf_step in the source (generated; do not edit).
   tf_model.c is built at -O0 with const defined away and -fsanitize=thread, which calls
   __tsan_readN / __tsan_writeN at every load and store; these stubs (no TSan runtime is linked)
   count them by region and the distinct bytes each touches. Build and run: make count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tf_model.h"

enum { R_WEIGHTS, R_STATE, R_IO, R_STACK, R_COUNT };
static const char *const region_names[R_COUNT] = {"weights_and_tables", "state", "inputs_outputs", "stack"};
static unsigned long long reads[R_COUNT], writes[R_COUNT], read_bytes[R_COUNT], write_bytes[R_COUNT];
static int counting;
static tf_state state;
static tf_input x[TF_BATCH * TF_D_IN];
static float y[TF_BATCH * TF_D_OUT];
static uintptr_t stack_hi;

#define SET_BITS 24 /* distinct bytes: one open-addressing set of addresses per region */
static uintptr_t *seen[R_COUNT];
static unsigned long long distinct[R_COUNT];

static int region(uintptr_t a)
{
    const uintptr_t s = (uintptr_t)&state;
    if (a >= s && a < s + sizeof(state)) {
        return R_STATE;
    }
    if ((a >= (uintptr_t)x && a < (uintptr_t)x + sizeof(x)) || (a >= (uintptr_t)y && a < (uintptr_t)y + sizeof(y))) {
        return R_IO;
    }
    if (a <= stack_hi && a + (16u << 20) > stack_hi) {
        return R_STACK;
    }
    return R_WEIGHTS;
}

static void note_byte(int r, uintptr_t a)
{
    const uintptr_t mask = ((uintptr_t)1 << SET_BITS) - 1;
    uintptr_t h = (a * (uintptr_t)0x9E3779B97F4A7C15ull) >> 8 & mask;
    while (seen[r][h] != 0 && seen[r][h] != a + 1) {
        h = (h + 1) & mask;
    }
    if (seen[r][h] == 0) {
        seen[r][h] = a + 1;
        distinct[r]++;
    }
}

static void access_(void *p, unsigned n, int write)
{
    const uintptr_t a = (uintptr_t)p;
    int r;
    unsigned b;
    if (!counting) {
        return;
    }
    r = region(a);
    if (write) {
        writes[r]++;
        write_bytes[r] += n;
    } else {
        reads[r]++;
        read_bytes[r] += n;
    }
    for (b = 0; b < n; b++) {
        note_byte(r, a + b);
    }
}

#define TF_STUB(N)                                                                   \
    void __tsan_read##N(void *p) { access_(p, N, 0); }                               \
    void __tsan_write##N(void *p) { access_(p, N, 1); }                              \
    void __tsan_unaligned_read##N(void *p) { access_(p, N, 0); }                     \
    void __tsan_unaligned_write##N(void *p) { access_(p, N, 1); }                    \
    void __tsan_volatile_read##N(void *p) { access_(p, N, 0); }                      \
    void __tsan_volatile_write##N(void *p) { access_(p, N, 1); }
TF_STUB(1)
TF_STUB(2)
TF_STUB(4)
TF_STUB(8)
TF_STUB(16)
void __tsan_read_range(void *p, unsigned long n) { unsigned long i; for (i = 0; i < n; i++) access_((char *)p + i, 1, 0); }
void __tsan_write_range(void *p, unsigned long n) { unsigned long i; for (i = 0; i < n; i++) access_((char *)p + i, 1, 1); }
void __tsan_init(void) {}
void __tsan_func_entry(void *pc) { (void)pc; }
void __tsan_func_exit(void) {}

int main(void)
{
    int r, i;
    volatile char marker = 0;
    stack_hi = (uintptr_t)&marker + 4096;
    for (r = 0; r < R_COUNT; r++) {
        seen[r] = (uintptr_t *)calloc((size_t)1 << SET_BITS, sizeof(uintptr_t));
        if (seen[r] == NULL) {
            return 2;
        }
    }
    for (i = 0; i < TF_BATCH * TF_D_IN; i++) {
#if TF_TOKENS
        x[i] = (tf_input)(i % TF_D_OUT);
#else
        x[i] = TF_INPUT_LO(i) + (TF_INPUT_HI(i) - TF_INPUT_LO(i)) * 0.25f * (float)(i % 4);
#endif
    }
    tf_reset(&state);
    for (i = 0; i < 3; i++) {
        (void)tf_step(&state, x, y);
    }
    counting = 1;
    r = tf_step(&state, x, y);
    counting = 0;
    printf("{\"status\": %d, \"regions\": {", r);
    for (i = 0; i < R_COUNT; i++) {
        printf("%s\"%s\": {\"reads\": %llu, \"writes\": %llu, \"read_bytes\": %llu, \"write_bytes\": %llu, \"distinct_bytes\": %llu}",
               i ? ", " : "", region_names[i], reads[i], writes[i], read_bytes[i], write_bytes[i], distinct[i]);
    }
    printf("}, \"state_bytes\": %lu}\n", (unsigned long)sizeof(state));
    return r == TF_OK ? 0 : 1;
}
"""


def timing_c() -> str:
    return TIMING_C


def count_cpp() -> str:
    return COUNT_CPP


def memcount_c() -> str:
    return MEMCOUNT_C
