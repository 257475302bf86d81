"""The standalone checks shipped beside the generated code: `tf_test.c`, `tf_expcheck.c` and the
`Makefile` that builds the library, runs them, and gathers the static evidence.

tf_test (no Python, no files: everything is compiled in from tf_golden.h) checks
  1. golden: the reference's outputs at every position of a first sequence (max_len positions;
     a ring cache: max(max_len, 4W + 1), across the ring's wrap-around) and of a second sequence
     after tf_reset, per element within the artifact's tolerance and normwise within
     TF_GOLDEN_NORMWISE;
  2. stale rows: the same sequences from a state whose every byte was first set to a NaN or
     an inf pattern (then tf_reset) give bitwise the same outputs -- nothing stale leaks;
  3. determinism: a second run is bitwise equal to the first;
  4. refusals: NaN, +-inf, out-of-domain inputs (bad token ids), bad positions and a full
     context (static cache) return their status and leave the state byte-for-byte unchanged;
     a ring cache instead slides: TF_MAX_LEN + 3W + 1 steps are accepted and the stored ring
     position stays in [0, 3W);
  5. candidates (attention kinds, codegen/peek.py): every first-sequence golden input given to all
     batch rows, one state stepped with tf_stage + tf_commit, another with tf_peek +
     tf_commit_candidate (candidate t mod TF_BATCH): outputs and the whole committed cache
     (every batch row) bitwise equal at every step, static and ring (across the wrap); an
     out-of-range candidate or position refused.
tf_expcheck checks tf_expneg on every STRIDE-th float32 (STRIDE 1: all 2^32 of them): within
1 ULP of double-precision exp on [-86.5, 0] (1,118,633,985 values), exactly 0 below it and for
-inf, 1 above 0, NaN for NaN -- which proves the ACSL contract Frama-C uses for it.

Not real-time code (text generation).
"""

from __future__ import annotations

from . import c_text
from .plan import Plan

TEST_C = r"""/* tf_test.c -- standalone check of the generated step (generated; do not edit).
   Build and run: make test. Exit status 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tf_model.h"
#include "tf_golden.h"

static tf_state state;    /* static storage: zero, a valid initial state */
static tf_state poisoned; /* every byte set to a NaN / inf pattern before its run */
static tf_state snapshot;
static float y_first[TF_GOLDEN_STEPS][TF_BATCH * TF_D_OUT];
static float y_other[TF_GOLDEN_STEPS][TF_BATCH * TF_D_OUT];
static int failures = 0;

static void fail(const char *what, int step, int status)
{
    failures++;
    if (failures <= 10) {
        printf("FAIL %s (step %d, status %d)\n", what, step, status);
    }
}

/* both golden sequences (tf_reset between them); outputs into ys */
static void run(tf_state *s, float ys[TF_GOLDEN_STEPS][TF_BATCH * TF_D_OUT])
{
    int t;
    tf_reset(s);
    for (t = 0; t < TF_GOLDEN_STEPS; t++) {
        int status;
        if (t == TF_GOLDEN_FIRST) {
            tf_reset(s);
        }
        status = tf_step(s, &tf_golden_x[t * TF_BATCH * TF_D_IN], ys[t]);
        if (status != TF_OK) {
            fail("golden step refused", t, status);
        }
    }
}

/* max |c - r| (err) and max |r| (scale) over golden steps lo..hi-1 against `ref`; with
   `elementwise`, every element must also be within the artifact's tolerance */
static void sequence_error(const float *ref, int lo, int hi, int elementwise, double *err, double *scale)
{
    int t, i;
    *err = 0.0;
    *scale = 0.0;
    for (t = lo; t < hi; t++) {
        for (i = 0; i < TF_BATCH * TF_D_OUT; i++) {
            const double r = ref[t * TF_BATCH * TF_D_OUT + i];
            const double e = fabs(y_first[t][i] - r);
            if (elementwise && !(e <= TF_GOLDEN_ATOL + TF_GOLDEN_RTOL * fabs(r))) {
                fail("golden output outside the artifact tolerance", t, i);
            }
            *err = e > *err ? e : *err;
            *scale = fabs(r) > *scale ? fabs(r) : *scale;
        }
    }
}

static void check_golden(void)
{
    double worst_abs = 0.0, worst_norm = 0.0, err, scale;
    int seq;
    for (seq = 0; seq < 2; seq++) {
        sequence_error(tf_golden_y, seq == 0 ? 0 : TF_GOLDEN_FIRST, seq == 0 ? TF_GOLDEN_FIRST : TF_GOLDEN_STEPS, 1,
                       &err, &scale);
        if (!(err <= TF_GOLDEN_NORMWISE * scale)) {
            fail("golden sequence outside the normwise bound", seq, 0);
        }
        worst_abs = err > worst_abs ? err : worst_abs;
        if (scale > 0.0 && err / scale > worst_norm) {
            worst_norm = err / scale;
        }
    }
    printf("golden: %d steps, max |c - r| = %.3g, normwise %.2f u (bound %.0f u), artifact tolerance atol %.3g rtol %.3g\n",
           TF_GOLDEN_STEPS, worst_abs, worst_norm / 0x1p-24, TF_GOLDEN_NORMWISE / 0x1p-24, (double)TF_GOLDEN_ATOL, (double)TF_GOLDEN_RTOL);
#if defined(TF_GOLDEN_FP32_BOUND)
    worst_norm = 0.0; /* a weight format: the same steps against the fp32 model, within the stated bound */
    for (seq = 0; seq < 2; seq++) {
        sequence_error(tf_golden_y32, seq == 0 ? 0 : TF_GOLDEN_FIRST, seq == 0 ? TF_GOLDEN_FIRST : TF_GOLDEN_STEPS, 0,
                       &err, &scale);
        if (!(err <= TF_GOLDEN_FP32_BOUND * scale)) {
            fail("golden sequence outside the stated bound against the fp32 model", seq, 0);
        }
        if (scale > 0.0 && err / scale > worst_norm) {
            worst_norm = err / scale;
        }
    }
    printf("weights %s: normwise error against the fp32 model %.3g (stated bound %.3g)\n", TF_GOLDEN_WEIGHTS, worst_norm,
           (double)TF_GOLDEN_FP32_BOUND);
#endif
}

static void poison(tf_state *s, unsigned char byte)
{
    memset(s, byte, sizeof(*s)); /* 0xFF: every float a NaN; 0x7F: 3.39e38, 0x80: -0 ... */
}

static void poison_inf(tf_state *s)
{
#if TF_SSM
    float *h = &s->state[0][0][0][0][0];
    size_t i;
    for (i = 0; i < sizeof(s->state) / sizeof(float); i++) {
        h[i] = (i % 3) ? ((i % 2) ? INFINITY : -INFINITY) : NAN;
    }
#else
    float *k = &s->k[0][0][0][0][0];
    float *v = &s->v[0][0][0][0][0];
    size_t i;
    for (i = 0; i < sizeof(s->k) / sizeof(float); i++) {
        k[i] = (i % 2) ? INFINITY : -INFINITY;
    }
    for (i = 0; i < sizeof(s->v) / sizeof(float); i++) {
        v[i] = (i % 3) ? INFINITY : NAN;
    }
#endif
}

static void check_same(const char *what)
{
    if (memcmp(y_first, y_other, sizeof(y_first)) != 0) {
        fail(what, 0, 0);
    } else {
        printf("%s: bitwise identical\n", what);
    }
}

static void expect_refusal(const char *what, int status, int want)
{
    if (status != want) {
        fail(what, 0, status);
    }
    if (memcmp(&state, &snapshot, sizeof(state)) != 0) {
        fail("state changed by a refused call", 0, status);
    }
}

static void check_refusals(void)
{
    tf_input x[TF_BATCH * TF_D_IN];
    float y[TF_BATCH * TF_D_OUT];
    int t;
    run(&state, y_other); /* a state in the middle of its life */
    tf_reset(&state);
    for (t = 0; t < 3; t++) {
        (void)tf_step(&state, &tf_golden_x[t * TF_BATCH * TF_D_IN], y);
    }
    memcpy(x, tf_golden_x, sizeof(x));
    memcpy(&snapshot, &state, sizeof(state));
    expect_refusal("position -1", tf_stage(&state, x, -1, y), TF_E_POSITION);
#if !TF_SSM
    expect_refusal("position TF_POSITIONS", tf_stage(&state, x, TF_POSITIONS, y), TF_E_POSITION);
#endif
#if TF_TOKENS
    x[0] = -1;
    expect_refusal("token -1", tf_step(&state, x, y), TF_E_TOKEN);
    x[0] = TF_D_OUT;
    expect_refusal("token V", tf_step(&state, x, y), TF_E_TOKEN);
#else
    x[0] = NAN;
    expect_refusal("NaN input", tf_step(&state, x, y), TF_E_NONFINITE);
    x[0] = INFINITY;
    expect_refusal("inf input", tf_step(&state, x, y), TF_E_NONFINITE);
    x[0] = -INFINITY;
    expect_refusal("-inf input", tf_step(&state, x, y), TF_E_NONFINITE);
    x[0] = nextafterf(TF_DOMAIN_HI, INFINITY);
    expect_refusal("input above the domain", tf_step(&state, x, y), TF_E_DOMAIN);
    x[0] = nextafterf(TF_DOMAIN_LO, -INFINITY);
    expect_refusal("input below the domain", tf_step(&state, x, y), TF_E_DOMAIN);
#endif
    memcpy(x, tf_golden_x, sizeof(x));
    tf_reset(&state);
#if TF_RING
    for (t = 0; t < TF_MAX_LEN + 3 * TF_WINDOW + 1; t++) {
        const int status = tf_step(&state, x, y);
        if (status != TF_OK || state.pos < 0 || state.pos >= TF_POSITIONS) {
            fail("a ring cache must slide", t, status);
        }
    }
    printf("slides: %d steps accepted, ring position in [0, %d)\n", TF_MAX_LEN + 3 * TF_WINDOW + 1, TF_POSITIONS);
    state.pos = TF_POSITIONS; /* a corrupted stored ring position */
    memcpy(&snapshot, &state, sizeof(state));
    expect_refusal("stored ring position 3W", tf_step(&state, x, y), TF_E_POSITION);
#elif TF_SSM
    for (t = 0; t < TF_MAX_LEN + 5; t++) {
        const int status = tf_step(&state, x, y);
        if (status != TF_OK || state.pos < 0 || state.pos > 1) {
            fail("an ssm state never fills", t, status);
        }
    }
    printf("never full: %d steps accepted, the buffer read next in {0, 1}\n", TF_MAX_LEN + 5);
    state.pos = -1; /* a corrupted stored position */
    memcpy(&snapshot, &state, sizeof(state));
    expect_refusal("stored position -1", tf_step(&state, x, y), TF_E_POSITION);
#else
    for (t = 0; t < TF_MAX_LEN; t++) {
        (void)tf_step(&state, x, y);
    }
    memcpy(&snapshot, &state, sizeof(state));
    expect_refusal("full context", tf_step(&state, x, y), TF_E_FULL);
#endif
    printf("refusals: status codes as documented, state unchanged byte for byte\n");
}

#if !TF_SSM
static tf_state cand;

/* 5. candidates (attention, codegen/peek.py): every golden step's row 0 given to all rows; state
   `state` steps it (tf_stage + tf_commit), state `cand` peeks it (tf_peek) and commits candidate
   t mod TF_BATCH: outputs and the whole committed cache bitwise equal at every step */
static void check_peek(void)
{
    static tf_input x[TF_BATCH * TF_D_IN];
    static float ya[TF_BATCH * TF_D_OUT], yb[TF_BATCH * TF_D_OUT];
    int t, b, i, sa, sb, choice = 0;
    int32_t pos = 0;
    poison(&state, 0xFF); /* stale rows of every batch row: NaN, the same in both states */
    tf_reset(&state);
    memcpy(&cand, &state, sizeof(state));
    for (t = 0; t < TF_GOLDEN_FIRST; t++) { /* static: max_len steps; ring: across the wrap */
        for (b = 0; b < TF_BATCH; b++) {
            for (i = 0; i < TF_D_IN; i++) {
                x[b * TF_D_IN + i] = tf_golden_x[t * TF_BATCH * TF_D_IN + i];
            }
        }
        sa = tf_stage(&state, x, pos, ya);
        sb = tf_peek(&cand, x, pos, yb);
        if (sa != TF_OK || sb != TF_OK || memcmp(ya, yb, sizeof(ya)) != 0) {
            fail("tf_peek differs from tf_stage", t, sb);
            return;
        }
        tf_commit(&state, pos);
        if (tf_commit_candidate(&cand, pos, choice) != TF_OK || memcmp(state.k, cand.k, sizeof(state.k)) != 0
            || memcmp(state.v, cand.v, sizeof(state.v)) != 0) {
            fail("tf_commit_candidate: cache differs from tf_commit's", t, 0);
            return;
        }
        choice = choice + 1 < TF_BATCH ? choice + 1 : 0; /* t mod TF_BATCH (cppcheck: no modulo of one) */
#if TF_RING
        pos = pos + 1 < TF_POSITIONS ? pos + 1 : TF_WINDOW; /* next_ring_position */
#else
        pos = pos + 1;
#endif
    }
    if (tf_commit_candidate(&cand, 0, TF_BATCH) != TF_E_POSITION || tf_commit_candidate(&cand, -1, 0) != TF_E_POSITION) {
        fail("tf_commit_candidate accepted a candidate or position out of range", 0, 0);
    }
    printf("candidates: tf_peek + tf_commit_candidate bitwise tf_stage + tf_commit\n");
}
#endif

int main(void)
{
    if (strcmp(tf_artifact_sha256(), TF_GOLDEN_ARTIFACT) != 0) {
        fail("library and golden vectors come from different artifacts", 0, 0);
    }
    run(&state, y_first);
    check_golden();
    run(&state, y_other);
    check_same("determinism (second run)");
    poison(&poisoned, 0xFF);
    run(&poisoned, y_other);
    check_same("stale rows (state filled with NaN)");
    poison(&poisoned, 0x7F);
    poison_inf(&poisoned);
    run(&poisoned, y_other);
    check_same("stale rows (cache filled with inf, -inf, NaN)");
    check_refusals();
#if !TF_SSM
    check_peek();
#endif
    printf(failures ? "tf_test: %d FAILURES\n" : "tf_test: all checks passed\n", failures);
    return failures ? 1 : 0;
}
"""

EXPCHECK_C = (
    r"""/* tf_expcheck.c -- tf_expneg against double-precision exp (generated; do not edit).
   Usage: tf_expcheck [STRIDE]; STRIDE 1 (the default) checks every one of the 2^32 float32:
     x in [-86.5, 0]   error |y - e| / ulp(e) < 1, e = exp((double)x), ulp(e) = 2^(floor(log2 e) - 23)
                       (glibc's double exp is within 1 ulp of double: ~2^-29 ulp of float);
     x < -86.5, -inf   y == +0 exactly;    x > 0   y == 1 (the clamp);    NaN   y is NaN.
   Together: the ACSL contract of tf_expneg (0 <= y <= 1 for every non-NaN x, 0 for -inf). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tf_model.c"

"""
    + c_text.every_float32_main(
        r"""    unsigned long long count = 0, other = 0, wrong = 0, u;
    double worst = 0.0;
    float worst_x = 0.0f;"""
    )
    + r"""        y = tf_expneg(x);
        if (x >= -86.5f && x <= 0.0f) {
            double e = exp((double)x), err;
            int ex;
            (void)frexp(e, &ex);
            err = fabs((double)y - e) / ldexp(1.0, ex - 24);
            if (err > worst) {
                worst = err;
                worst_x = x;
            }
            count++;
        } else {
            other++;
            if (x != x) {
                wrong += (y == y);
            } else if (x > 0.0f) {
                wrong += (y != 1.0f);
            } else {
                b.f = y;
                wrong += (b.u != 0u); /* exactly +0 */
            }
        }
    }
    printf("exp: %llu values of [-86.5, 0] (stride %lu), max error %.4f ulp at x = %a; "
           "%llu others (NaN, x > 0, x < -86.5): %llu wrong; special values %s\n",
           count, stride, worst, (double)worst_x, other, wrong, wrong ? "WRONG" : "exact");
    return (worst < 1.0 && wrong == 0) ? 0 : 1;
}
"""
)

MAKEFILE = r"""# Makefile -- build and check the C step of artifact {sha} (generated by tickformer codegen).
#   make            static library libtf_model.a and the test program tf_test
#   make shared     libtf_model.so (what tickformer's `c` backend loads)
#   make test       strict build, golden/stale-row/refusal checks, sanitizers, stack report,
#                   cppcheck (skipped with a message if not installed: apt-get install cppcheck;
#                   it reads the weights as declarations, -DTF_WEIGHT_SHAPES_ONLY: no check
#                   depends on their values, and its parser is slow over 10^5 of them),
#                   a sampled exp check
#   make expcheck   the exhaustive exp check (all 2^32 float32)
#   make ssmcheck   (ssm artifacts) the exhaustive check of softplus, tanh and 1 - exp(-s)
#   make timing     tf_timing: the step timed in its own process, linked with libtf_model.a (the
#                   deployment build: these flags); cross-compile with CC=aarch64-linux-gnu-gcc
#   make count      floating-point operations (tf_count, C++: CXX) and memory accesses (tf_memcount,
#                   -fsanitize=thread instrumentation, our own stubs) of one tf_step, as JSON
#   make frama-c    Frama-C EVA on the step (if frama-c is installed: apt-get install frama-c-base):
#                   no alarm for every input in the domain, position and reachable cache
# Variables: CC, OPT (default -O2), ARCH (e.g. -march=native; default: the compiler's baseline).
CC ?= cc
CXX ?= c++
OPT ?= -O2
ARCH ?=
# -ffp-contract=off: no fused multiply-add (the reference rounds every product); GCC's default
# under -std=c99, explicit for other modes and compilers. -fno-tree-loop-distribute-patterns:
# GCC would otherwise turn copy loops into memmove/memset calls. -fno-math-errno: sqrtf needs
# no library call for errno (its argument is var + eps > 0). No -ffast-math: it would break
# the -inf selection and the NaN checks.
STRICT = -std=c99 -Wall -Wextra -Werror -pedantic -Wvla -Wshadow -Wconversion -Wno-sign-conversion
NOLIBCALLS ?= -fno-tree-loop-distribute-patterns  # GCC's flag; clear it for other compilers
CFLAGS_MODEL = $(STRICT) $(OPT) $(ARCH) -ffp-contract=off -fno-math-errno $(NOLIBCALLS)
SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
CPPCHECK ?= cppcheck
FRAMAC ?= frama-c
EVA_UNROLL ?= {unroll}  # the longest constant loop: EVA unrolls every loop instead of widening it

.PHONY: all shared timing count test check sanitize stack cppcheck expcheck expcheck-sampled ssmcheck ssmcheck-sampled frama-c clean

all: libtf_model.a tf_test

tf_model.o: tf_model.c tf_model.h
	$(CC) $(CFLAGS_MODEL) -fstack-usage -fcallgraph-info=su -c tf_model.c -o tf_model.o

libtf_model.a: tf_model.o
	ar rcs libtf_model.a tf_model.o

libtf_model.so: tf_model.c tf_model.h
	$(CC) $(CFLAGS_MODEL) -fPIC -shared tf_model.c -o libtf_model.so

shared: libtf_model.so

tf_test: tf_test.c tf_golden.h libtf_model.a
	$(CC) -std=c99 -O2 $(ARCH) -Wall -Wextra -Werror tf_test.c libtf_model.a -lm -o tf_test

tf_test_san: tf_test.c tf_golden.h tf_model.c tf_model.h
	$(CC) $(STRICT) -O1 -g $(ARCH) -ffp-contract=off -fno-math-errno $(SANITIZE) tf_test.c tf_model.c -lm -o tf_test_san

tf_expcheck: tf_expcheck.c tf_model.c tf_model.h
	$(CC) -std=c99 -O2 $(ARCH) -ffp-contract=off -Wall -Wextra -Werror tf_expcheck.c -lm -o tf_expcheck

tf_timing: tf_timing.c tf_model.h libtf_model.a
	$(CC) -std=gnu99 -O2 $(ARCH) -Wall -Wextra tf_timing.c libtf_model.a -lm -o tf_timing

timing: tf_timing

tf_count: tf_count.cpp tf_model.c tf_model.h
	$(CXX) -std=gnu++17 -O1 -w tf_count.cpp -o tf_count

tf_model_tsan.o: tf_model.c tf_model.h
	$(CC) -std=c99 -O0 -ffp-contract=off -Dconst= -fsanitize=thread -c tf_model.c -o tf_model_tsan.o

tf_memcount: tf_memcount.c tf_model_tsan.o
	$(CC) -std=c99 -O1 tf_memcount.c tf_model_tsan.o -lm -o tf_memcount

count: tf_count tf_memcount
	./tf_count
	./tf_memcount
{ssm_rules}
check: tf_test
	./tf_test

sanitize: tf_test_san
	./tf_test_san

stack: tf_model.o
	@echo "stack bytes per function (-fstack-usage; 'static' = a fixed frame); frames only -- the worst case per"
	@echo "entry point over the call graph (tf_model.ci): python -m tickformer.codegen.evidence ."
	@cat tf_model.su

cppcheck:
	@if command -v $(CPPCHECK) >/dev/null 2>&1; then \
		$(CPPCHECK) --std=c99 --enable=warning,style,performance,portability --error-exitcode=1 --quiet -DTF_WEIGHT_SHAPES_ONLY \
			--inline-suppr --suppress=missingIncludeSystem tf_model.c tf_test.c && echo "cppcheck: no findings"; \
	else echo "cppcheck: SKIPPED (not installed: apt-get install cppcheck)"; fi

expcheck-sampled: tf_expcheck
	./tf_expcheck 997

expcheck: tf_expcheck
	./tf_expcheck 1

# EVA passes when it raises no alarm and proves every property except the one it is told to
# assume (the LayerNorm bound, tf_ln_bound: reported "unknown", see tf_eva.c).
frama-c:
	@if command -v $(FRAMAC) >/dev/null 2>&1; then \
		$(FRAMAC) -machdep x86_64 -cpp-extra-args="-DTF_FRAMA_C" -eva -eva-precision 1 -eva-auto-loop-unroll $(EVA_UNROLL) -warn-special-float nan \
			-eva-use-spec {eva_specs} tf_model.c tf_eva.c -main tf_eva_main > tf_eva.log 2>&1; \
		grep -A16 "ANALYSIS SUMMARY" tf_eva.log; \
		grep -q " 0 alarms generated" tf_eva.log && grep -q "Assertions .* 0 invalid .* 1 total" tf_eva.log \
			&& test "$$(grep -c 'eva:alarm' tf_eva.log)" = "$$(grep -c 'tf_ln_bound. got status unknown' tf_eva.log)" \
			&& echo "frama-c: EVA raised no alarm (one assumption: tf_ln_bound)"; \
	else echo "frama-c: SKIPPED (not installed: apt-get install frama-c-base)"; fi

test: check sanitize stack cppcheck expcheck-sampled{ssm_test}

clean:
	rm -f *.o *.a *.so *.su *.ci tf_test tf_test_san tf_expcheck tf_ssmcheck tf_timing tf_count tf_memcount tf_eva.log
"""


def test_c(plan: Plan) -> str:
    return TEST_C.replace(
        '#include "tf_golden.h"',
        f'#include "tf_golden.h"\n\n#define TF_GOLDEN_ARTIFACT "{plan.artifact_sha256}"',
    )


def expcheck_c() -> str:
    return EXPCHECK_C


def eva_unroll(plan: Plan) -> int:
    """The longest constant loop of the step (EVA's -eva-auto-loop-unroll)."""
    cfg = plan.config
    return 1 + max(plan.rows, cfg.d_ff, 3 * plan.d, plan.d * plan.d_state, plan.d_out, plan.batch * plan.d_in)


SSM_RULES = r"""
tf_ssmcheck: tf_ssmcheck.c tf_model.c tf_model.h
	$(CC) -std=c99 -O2 $(ARCH) -ffp-contract=off -Wall -Wextra -Werror tf_ssmcheck.c -lm -o tf_ssmcheck

ssmcheck-sampled: tf_ssmcheck
	./tf_ssmcheck 997

ssmcheck: tf_ssmcheck
	./tf_ssmcheck 1
"""


def makefile(plan: Plan) -> str:
    ssm = plan.block_kind == "ssm"
    return (
        MAKEFILE.replace("{sha}", plan.artifact_sha256)
        .replace("{unroll}", str(eva_unroll(plan)))
        .replace("{ssm_rules}", SSM_RULES if ssm else "")
        .replace("{ssm_test}", " ssmcheck-sampled" if ssm else "")
        .replace("{eva_specs}", "tf_expneg,tf_softplus,tf_tanh_pos" if ssm else "tf_expneg")
    )
