/*
 * pair_map.c: the (number, number) -> number map of pair_map.h, for the
 * Perfetto export's named tracks. It must never hold rows: it grows with
 * tracks only, doubling its slots when half full.
 */
#include <stdlib.h>

#include "cli/pair_map.h"

static size_t pair_map_hash(int64_t first, int64_t second)
{
    uint64_t hash = (uint64_t)first * 0x9E3779B97F4A7C15ull ^ (uint64_t)second;
    hash ^= hash >> 31;
    hash *= 0xBF58476D1CE4E5B9ull;
    hash ^= hash >> 29;
    return (size_t)hash;
}

int64_t *cli_pair_map_find(cli_pair_map *map, int64_t first, int64_t second)
{
    if (map->capacity == 0)
        return NULL;
    size_t mask = map->capacity - 1;
    for (size_t at = pair_map_hash(first, second) & mask;; at = (at + 1) & mask) {
        cli_pair_map_slot *slot = &map->slots[at];
        if (!slot->used)
            return NULL;
        if (slot->first == first && slot->second == second)
            return &slot->value;
    }
}

int cli_pair_map_insert(cli_pair_map *map, int64_t first, int64_t second, int64_t value)
{
    if ((map->count + 1) * 2 > map->capacity) {
        size_t capacity = map->capacity == 0 ? 64 : map->capacity * 2;
        cli_pair_map_slot *slots = calloc(capacity, sizeof *slots);
        if (slots == NULL)
            return -1;
        for (size_t i = 0; i < map->capacity; i++) {
            if (!map->slots[i].used)
                continue;
            size_t at = pair_map_hash(map->slots[i].first, map->slots[i].second);
            while (slots[at & (capacity - 1)].used)
                at++;
            slots[at & (capacity - 1)] = map->slots[i];
        }
        free(map->slots);
        map->slots = slots;
        map->capacity = capacity;
    }
    size_t mask = map->capacity - 1;
    size_t at = pair_map_hash(first, second) & mask;
    while (map->slots[at].used)
        at = (at + 1) & mask;
    map->slots[at] =
        (cli_pair_map_slot){.first = first, .second = second, .value = value, .used = 1};
    map->count++;
    return 0;
}

void cli_pair_map_free(cli_pair_map *map)
{
    free(map->slots);
    *map = (cli_pair_map){0};
}
