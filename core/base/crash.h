/* base/crash.h: what alphast is running when it is running code it does
 * not own (a plugin's create, forward, observe or a fused op's backward),
 * so that a crash or an exit() there names the plugin instead of leaving
 * the user with a bare "Segmentation fault". */
#ifndef ALPHAST_CRASH_H
#define ALPHAST_CRASH_H

/* What runs now: "forward of ffn plugin", "evil", its file, layer (-1: none). */
typedef struct ast_crash_scope {
    const char *action;
    const char *subject;
    const char *path;
    int layer;
} ast_crash_scope;

/* Installs handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT and an
 * atexit hook, once per process. A handler prints one line naming the
 * scope, then gives the signal to the handler installed before it (a
 * sanitizer's, or the default: a core dump and the usual exit status). */
void ast_crash_install(void);

/* Enter a scope (the previous one is saved in *saved) and leave it. Both
 * only store pointers: cheap enough for every plugin call. The strings
 * must outlive the scope. */
void ast_crash_enter(ast_crash_scope *saved, const char *action, const char *subject, const char *path, int layer);
void ast_crash_leave(const ast_crash_scope *saved);

#endif
