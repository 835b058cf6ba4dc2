@echo off
rem kubectl runs this to complete "kubectl litepool ..." on Windows; see kubectl_complete-litepool.
if exist "%~dp0kubectl-litepool.exe" (
  "%~dp0kubectl-litepool.exe" __complete %*
) else (
  kubectl-litepool.exe __complete %*
)
