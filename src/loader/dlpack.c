/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_dlpack_deleter and stoker_dlpack_capsule_destructor (stoker.h): thunks that run a
 * binding's release inside its interpreter with the interpreter's pending exception set
 * aside, from whichever thread the consumer frees a tensor on. */
#include <stdatomic.h>

#include "common/common.h"

/* Set once by the binding before its first export and read by consumers' threads later. */
static _Atomic(const stoker_dlpack_guard *) dlpack_guard;

int stoker_dlpack_set_guard(const stoker_dlpack_guard *g)
{
    if (!g || !g->enter || !g->leave || !g->save || !g->restore || !g->deleter || !g->destructor)
        return STOKER_E_INVALID;
    atomic_store_explicit(&dlpack_guard, g, memory_order_release);
    return 0;
}

/* fn(arg) holding the interpreter's lock, with no exception pending; the one pending before
 * (if any) is pending again afterwards, unchanged. fn itself reports nothing back: an
 * exception it raised cannot propagate through the consumer's C code. */
static void guarded_call(const stoker_dlpack_guard *g, void (*fn)(void *), void *arg)
{
    const int state = g->enter();
    void *type = NULL, *value = NULL, *traceback = NULL;
    g->save(&type, &value, &traceback);
    fn(arg);
    g->restore(type, value, traceback);
    g->leave(state);
}

void stoker_dlpack_deleter(void *managed_tensor)
{
    const stoker_dlpack_guard *g = atomic_load_explicit(&dlpack_guard, memory_order_acquire);
    if (g && managed_tensor)
        guarded_call(g, g->deleter, managed_tensor);
}

void stoker_dlpack_capsule_destructor(void *capsule)
{
    const stoker_dlpack_guard *g = atomic_load_explicit(&dlpack_guard, memory_order_acquire);
    if (g && capsule)
        guarded_call(g, g->destructor, capsule);
}
