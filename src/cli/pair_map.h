/*
 * pair_map.h: a small map from a pair of numbers to a number, for the
 * Perfetto export's tracks: which tracks already have names, and which
 * synthetic pid a (process, device) pair got.
 *
 * Tracks number in the tens or thousands, not in the millions like the
 * rows, so this is the only memory an export grows, and only with the
 * number of tracks. It must never be used for rows. Open addressing,
 * linear probing; a zeroed cli_pair_map is an empty map.
 */
#ifndef FLARE_CLI_PAIR_MAP_H
#define FLARE_CLI_PAIR_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_pair_map_slot {
    int64_t first;
    int64_t second;
    int64_t value;
    int used;
} cli_pair_map_slot;

typedef struct cli_pair_map {
    cli_pair_map_slot *slots;
    size_t capacity; /* a power of two, or 0 before the first insert */
    size_t count;
} cli_pair_map;

/* The value stored for (first, second), or NULL when there is none. The
 * pointer is valid until the next insert. */
int64_t *cli_pair_map_find(cli_pair_map *map, int64_t first, int64_t second);

/* Adds a key that is not in the map yet. Returns 0, or -1 out of memory
 * (the map is then unchanged). */
int cli_pair_map_insert(cli_pair_map *map, int64_t first, int64_t second, int64_t value);

/* Frees the slots and leaves an empty map. */
void cli_pair_map_free(cli_pair_map *map);

#endif /* FLARE_CLI_PAIR_MAP_H */
