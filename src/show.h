/* SPDX-License-Identifier: MIT */
#ifndef AMBER_SHOW_H
#define AMBER_SHOW_H

#include <stdbool.h>
#include <stdio.h>

struct img_dir;

/* Is name one of amber show's text views (ps, fds, mems)? */
bool show_is_view(const char *name);
/* Print view name of the image in img (dir: its path, for messages): 0, or 1 if some of
 * it could not be read. */
int show_view(struct img_dir *img, const char *dir, const char *name, FILE *out);

#endif
