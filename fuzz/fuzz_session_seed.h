/*
 * fuzz_session_seed.h: the valid session fuzz_session_reader damages: one
 * session.db written through the store's own writer API, with a row in
 * every table and every branch of the report and the exports worth taking
 * (hostile names, every copy kind, CUDA graphs, PM samples, rules, windows,
 * kernel and range replay, drops, capabilities).
 *
 * Fuzz-only. It must never write anywhere but the directory it is given,
 * and never fail quietly: a seed that cannot be built aborts the fuzzer,
 * since fuzzing a half-built seed would prove nothing.
 */
#ifndef FLARE_FUZZ_SESSION_SEED_H
#define FLARE_FUZZ_SESSION_SEED_H

/* Writes DIR/session.db (DIR must exist and hold no session) at the
 * store's current schema version, and closes it. Aborts on any failure. */
void fuzz_session_seed_write(const char *directory);

#endif /* FLARE_FUZZ_SESSION_SEED_H */
