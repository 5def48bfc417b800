/*
 * cuda_descriptor.h: the CUDA backend's descriptor (backend.h), for the
 * session layer alone.
 *
 * In a build without the CUDA headers the stub answers NULL, so the session
 * layer knows there is no CUDA backend. Must never be called by a feature.
 */
#ifndef FLARE_BACKEND_CUDA_DESCRIPTOR_H
#define FLARE_BACKEND_CUDA_DESCRIPTOR_H

#include "backend/backend.h"

/* The CUDA backend's descriptor, or NULL in a build without it. */
const backend_descriptor *cuda_descriptor(void);

#endif /* FLARE_BACKEND_CUDA_DESCRIPTOR_H */
