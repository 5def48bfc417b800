/*
 * pc_names.c: the bounded function-name table (pc_names.h). Open addressing
 * over a power-of-two slot array that doubles at half full (up to the
 * names bound); each entry one allocation holding key and value, so a kept
 * value never moves when the slots grow.
 *
 * Must never: free an entry before destroy, or store a name in part.
 */
#include "pcsamp/pc_names.h"

#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

typedef struct pc_name_entry {
    uint64_t hash;
    const char *value; /* inside the same allocation, after the key */
    char key[];
} pc_name_entry;

struct pc_names {
    pc_name_entry **slots;
    size_t slot_count; /* a power of two */
    size_t count;
    size_t bytes;
    size_t max_names, max_bytes;
    uint64_t refused;
};

static uint64_t name_hash(const char *text)
{
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++)
        hash = (hash ^ *p) * 0x100000001b3ull;
    return hash;
}

int pc_names_create(size_t max_names, size_t max_bytes, pc_names **out)
{
    if (out == NULL || max_names == 0 || max_bytes == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    pc_names *names = calloc(1, sizeof(*names));
    if (names == NULL)
        return FLARE_ERR_NO_MEMORY;
    names->slot_count = 64;
    names->slots = calloc(names->slot_count, sizeof(*names->slots));
    if (names->slots == NULL) {
        free(names);
        return FLARE_ERR_NO_MEMORY;
    }
    names->max_names = max_names;
    names->max_bytes = max_bytes;
    *out = names;
    return FLARE_OK;
}

void pc_names_destroy(pc_names *names)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < names->slot_count; i++)
        free(names->slots[i]);
    free(names->slots);
    free(names);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t slot_of(const pc_names *names, const char *key, uint64_t hash)
{
    size_t mask = names->slot_count - 1;
    size_t i = (size_t)hash & mask;
    while (names->slots[i] != NULL &&
           (names->slots[i]->hash != hash || strcmp(names->slots[i]->key, key) != 0))
        i = (i + 1) & mask;
    return i;
}

const char *pc_names_find(const pc_names *names, const char *key)
{
    if (names == NULL || key == NULL)
        return NULL;
    const pc_name_entry *entry = names->slots[slot_of(names, key, name_hash(key))];
    return entry != NULL ? entry->value : NULL;
}

/* Doubles the slots. FLARE_OK or FLARE_ERR_NO_MEMORY (nothing changed). */
static int grow(pc_names *names)
{
    size_t count = names->slot_count * 2;
    pc_name_entry **slots = calloc(count, sizeof(*slots));
    if (slots == NULL)
        return FLARE_ERR_NO_MEMORY;
    for (size_t i = 0; i < names->slot_count; i++) {
        pc_name_entry *entry = names->slots[i];
        if (entry == NULL)
            continue;
        size_t j = (size_t)entry->hash & (count - 1);
        while (slots[j] != NULL)
            j = (j + 1) & (count - 1);
        slots[j] = entry;
    }
    free(names->slots);
    names->slots = slots;
    names->slot_count = count;
    return FLARE_OK;
}

const char *pc_names_add(pc_names *names, const char *key, const char *value)
{
    if (names == NULL || key == NULL || value == NULL)
        return NULL;
    uint64_t hash = name_hash(key);
    size_t slot = slot_of(names, key, hash);
    if (names->slots[slot] != NULL)
        return names->slots[slot]->value;
    size_t key_bytes = strlen(key) + 1, value_bytes = strlen(value) + 1;
    size_t bytes = key_bytes + value_bytes;
    if (names->count == names->max_names || bytes > names->max_bytes - names->bytes) {
        names->refused++;
        return NULL;
    }
    if ((names->count + 1) * 2 > names->slot_count) {
        if (grow(names) != FLARE_OK) {
            names->refused++;
            return NULL;
        }
        slot = slot_of(names, key, hash);
    }
    pc_name_entry *entry = malloc(sizeof(*entry) + bytes);
    if (entry == NULL) {
        names->refused++;
        return NULL;
    }
    entry->hash = hash;
    memcpy(entry->key, key, key_bytes);
    memcpy(entry->key + key_bytes, value, value_bytes);
    entry->value = entry->key + key_bytes;
    names->slots[slot] = entry;
    names->count++;
    names->bytes += bytes;
    return entry->value;
}

size_t pc_names_count(const pc_names *names)
{
    return names != NULL ? names->count : 0;
}

uint64_t pc_names_refused(const pc_names *names)
{
    return names != NULL ? names->refused : 0;
}
