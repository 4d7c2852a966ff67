# The random-block shift model fitted by lme4 (Debian's r-cran-lme4), for bench/population_fit_lme4.py:
#   Rscript bench/population_fit_lme4.R RUNS.csv   (columns block, log_beta, sum, took_up)
# prints one line of key=value: the fixed effects, the block SDs, the log likelihood, log k = sum / log_beta and its
# profile-likelihood ends (uniroot on the model refitted with log k held), the LR p of sd_mode = 0 (half chi2_1) and
# the profile interval of sd_mode (NA where lme4's profile fails).
suppressMessages(library(lme4))
d <- read.csv(commandArgs(TRUE)[1])
fit <- function(data, formula) suppressMessages(suppressWarnings(glmer(formula, data = data, family = binomial)))
m <- fit(d, took_up ~ log_beta + sum + (1 + sum || block))
best <- as.numeric(logLik(m))
beta <- fixef(m)
sds <- as.data.frame(VarCorr(m))$sdcor
log_k <- beta[["sum"]] / beta[["log_beta"]]
held <- function(lk) {
  d$z <- d$log_beta + d$sum * lk
  2 * (best - as.numeric(logLik(fit(d, took_up ~ z + (1 + sum || block))))) - qchisq(0.95, 1)
}
low <- uniroot(held, c(log_k - 5, log_k), tol = 1e-6)$root
high <- uniroot(held, c(log_k, log_k + 5), tol = 1e-6)$root
m0 <- fit(d, took_up ~ log_beta + sum + (1 | block))
lr <- 2 * (best - as.numeric(logLik(m0)))
p <- if (lr <= 1e-9) 1 else 0.5 * pchisq(lr, 1, lower.tail = FALSE)
sd_ci <- tryCatch(suppressWarnings(confint(profile(m, which = "theta_", signames = FALSE)))[2, ], error = function(e) c(NA, NA))
cat(sprintf("intercept=%.6f slope=%.6f mode_effect=%.6f sd_block=%.6f sd_mode=%.6f loglik=%.6f log_k=%.6f log_low=%.6f log_high=%.6f mode_sd_p=%.6g sd_low=%.6f sd_high=%.6f\n",
            beta[[1]], beta[["log_beta"]], beta[["sum"]], sds[1], sds[2], best, log_k, low, high, p, sd_ci[1], sd_ci[2]))
