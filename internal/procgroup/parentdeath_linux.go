package procgroup

import "syscall"

func setParentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
