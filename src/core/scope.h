/*
 * scope.h: who else hears of a scope on flare's scope stacks.
 *
 * One observer per process, set by the session layer (range replay starts
 * and ends its span on a named scope). Core knows only the two calls; what
 * they do is the observer's. An observer runs on the application's thread
 * inside flare_scope_begin/end, so it must never block or allocate while
 * nothing is selected, and is never removed once set (a scope that began
 * under it must end under it).
 */
#ifndef FLARE_CORE_SCOPE_H
#define FLARE_CORE_SCOPE_H

typedef struct core_scope_observer {
    void (*enter)(const char *name); /* after the frame is pushed */
    void (*exit)(const char *name);  /* after the close is recorded */
} core_scope_observer;

/* Sets the process's observer (NULL: none). */
void core_scope_set_observer(const core_scope_observer *observer);

#endif /* FLARE_CORE_SCOPE_H */
