/*
 * store_files.c: claiming a session directory and holding a disk reserve
 * (store_files.h).
 *
 * Every file here is created with O_EXCL | O_NOFOLLOW, or opened with
 * O_NOFOLLOW: a planted link is refused, never followed. Must never delete
 * anything but its own reserve files.
 */
#include "store/store_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flare/flare.h"
#include "store/store.h"

/* Files whose presence means a session (or its remains) is there already. */
static const char *const session_files[] = {STORE_DATABASE_NAME, STORE_DATABASE_NAME "-wal",
                                            STORE_DATABASE_NAME "-shm",
                                            STORE_DATABASE_NAME "-journal", STORE_LOG_NAME};

static int create_exclusive(const char *dir, const char *name, char *error, size_t error_size)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        snprintf(error, error_size, "%s/%s: path too long", dir, name);
        return FLARE_ERR_IO;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int error_number = errno;
        if (error_number == EEXIST) {
            snprintf(error, error_size,
                     "%s already holds a session (%s); choose another directory or remove it", dir,
                     name);
            return FLARE_ERR_STATE;
        }
        snprintf(error, error_size, "cannot create %s: %s", path, strerror(error_number));
        return FLARE_ERR_IO;
    }
    close(fd);
    return FLARE_OK;
}

int store_claim_directory(const char *dir, char *error, size_t error_size)
{
    /* The database first: O_EXCL makes its creation the one decision of
     * which launcher owns dir. A link there, even a dangling one, is EEXIST. */
    int status = create_exclusive(dir, STORE_DATABASE_NAME, error, error_size);
    if (status != FLARE_OK)
        return status;
    /* The winner checks for remains of an earlier session (its write-ahead
     * log would be replayed into the new database) and makes its log. */
    for (size_t i = 1; i < sizeof(session_files) / sizeof(session_files[0]); i++) {
        char path[4096];
        struct stat info;
        snprintf(path, sizeof(path), "%s/%s", dir, session_files[i]);
        if (strcmp(session_files[i], STORE_LOG_NAME) == 0)
            status = create_exclusive(dir, STORE_LOG_NAME, error, error_size);
        else if (lstat(path, &info) == 0) {
            snprintf(error, error_size,
                     "%s already holds a session (%s); choose another directory or remove it", dir,
                     session_files[i]);
            status = FLARE_ERR_STATE;
        }
        if (status != FLARE_OK) {
            /* Undo the claim: what this call created, nothing else. */
            char database[4096];
            snprintf(database, sizeof(database), "%s/%s", dir, STORE_DATABASE_NAME);
            unlink(database);
            return status;
        }
    }
    return FLARE_OK;
}

int store_open_log(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOG_NAME) >= (int)sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static int reserve_path(const char *dir, int64_t pid, char *path, size_t size)
{
    return snprintf(path, size, "%s/%s%lld", dir, STORE_RESERVE_PREFIX, (long long)pid) < (int)size
               ? 0
               : -1;
}

int store_reserve_create(const char *dir, int64_t pid, uint32_t bytes, char *error,
                         size_t error_size)
{
    char path[4096];
    if (reserve_path(dir, pid, path, sizeof(path)) != 0) {
        snprintf(error, error_size, "%s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(error, error_size, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    /* posix_fallocate really allocates the blocks (a sparse file would free
     * nothing when deleted). */
    int result = posix_fallocate(fd, 0, (off_t)bytes);
    close(fd);
    if (result != 0) {
        snprintf(error, error_size, "cannot reserve %u KiB in %s: %s", bytes / 1024, dir,
                 strerror(result));
        unlink(path);
        return -1;
    }
    return 0;
}

void store_reserve_release(const char *dir, int64_t pid)
{
    char path[4096];
    if (reserve_path(dir, pid, path, sizeof(path)) == 0)
        unlink(path);
}

void store_reserve_release_all(const char *dir)
{
    DIR *listing = opendir(dir);
    if (listing == NULL)
        return;
    struct dirent *entry;
    size_t prefix = strlen(STORE_RESERVE_PREFIX);
    while ((entry = readdir(listing)) != NULL) {
        if (strncmp(entry->d_name, STORE_RESERVE_PREFIX, prefix) != 0 ||
            strspn(entry->d_name + prefix, "0123456789") != strlen(entry->d_name + prefix))
            continue;
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, entry->d_name) < (int)sizeof(path))
            unlink(path);
    }
    closedir(listing);
}
