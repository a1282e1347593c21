/* SPDX-License-Identifier: MIT */
#ifndef AMBER_DUMP_H
#define AMBER_DUMP_H

/* -EINTR (logged) once amber was asked to stop; long loops poll it. */
int dump_check_interrupted(void);

#endif
